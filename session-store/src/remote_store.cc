// RemoteStore: the SessionStore interface over gRPC to a sinew-store server.
#include <grpcpp/grpcpp.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "event_util.h"
#include "store_channel.h"
#include "sinew/grpc_callback_queue.h"
#include "sinew/grpc_status.h"
#include "sinew/grpc_tls.h"
#include "sinew/grpc_trace.h"
#include "sinew/proto/session_store.grpc.pb.h"
#include "sinew/session_store/session_store.h"
#include "sinew/session_store/store_service.h"

namespace sinew::store {
namespace {

using Stub = v1::SessionStore::Stub;

// A channel and its stub. RemoteStore replaces it after a call fails with UNAVAILABLE (see
// Failed); whoever still uses the old one (a call, a watch) keeps it alive.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<Stub> stub;
};

// Streams Watch responses into a queue that Next() drains, through gRPC's callback API:
// no thread of its own. gRPC's threads deliver each event (and call OnReady's callback).
class RemoteWatcher final : public EventWatcher, private grpc::ClientReadReactor<v1::Event> {
 public:
  RemoteWatcher(std::shared_ptr<Connection> conn, const v1::WatchRequest& req) : conn_(std::move(conn)), req_(req) {
    PinGrpcCallbackQueue();
    conn_->stub->async()->Watch(&ctx_, &req_, this);
    StartRead(&incoming_);
    StartCall();
  }
  // gRPC may still deliver until OnDone: cancel, then wait for it.
  ~RemoteWatcher() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = nullptr;  // dropped unfired, as OnReady promises
    }
    ctx_.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }

  Result<bool> Next(v1::Event* out, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || done_ || cancelled_; });
    if (cancelled_) return Status::Cancelled("watch was cancelled");
    if (!queue_.empty()) {
      *out = std::move(queue_.front());
      queue_.pop_front();
      return true;
    }
    if (done_) {
      return final_.ok() ? Status::Unavailable("watch stream ended (server shut down?)") : final_;
    }
    return false;
  }

  void Cancel() override {
    std::function<void()> ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      ready.swap(ready_);
    }
    cv_.notify_all();
    ctx_.TryCancel();
    if (ready) ready();
  }

  void OnReady(std::function<void()> ready) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() && !done_ && !cancelled_) {
        ready_ = std::move(ready);
        return;
      }
    }
    ready();
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone follows
    std::function<void()> ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(incoming_));
      ready.swap(ready_);
    }
    cv_.notify_all();
    if (ready) ready();
    incoming_.Clear();
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    std::function<void()> ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      final_ = FromGrpcStatus(status);
      done_ = true;
      ready.swap(ready_);
    }
    cv_.notify_all();
    if (ready) ready();
    // Last: the destructor may run as soon as the lock is released.
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

  const std::shared_ptr<Connection> conn_;  // the channel the watch runs on
  const v1::WatchRequest req_;
  grpc::ClientContext ctx_;
  v1::Event incoming_;  // the read in flight (gRPC's until OnReadDone)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::Event> queue_;   // GUARDED_BY(mu_)
  std::function<void()> ready_;   // GUARDED_BY(mu_)
  bool done_ = false;             // GUARDED_BY(mu_); the call ended (final_ says how)
  bool finished_ = false;         // GUARDED_BY(mu_); OnDone returned all it needs
  bool cancelled_ = false;        // GUARDED_BY(mu_)
  Status final_;                  // GUARDED_BY(mu_)
};

// The arguments of every channel to a sinew-store server.

class RemoteStore final : public SessionStore {
 public:
  RemoteStore(std::string address, std::shared_ptr<Connection> conn, RemoteOptions options)
      : address_(std::move(address)), options_(options), conn_(std::move(conn)) {}

  // A new channel to the server (the same address, TLS and arguments).
  static Result<std::shared_ptr<Connection>> NewConnection(const std::string& address, const RemoteOptions& options) {
    SINEW_ASSIGN_OR_RETURN(auto channel, GrpcChannel(address, options.tls, StoreChannelArgs()));
    auto c = std::make_shared<Connection>();
    c->stub = v1::SessionStore::NewStub(channel);
    c->channel = std::move(channel);
    return c;
  }

  template <typename Req, typename Resp, typename Fn>
  Result<Resp> Call(Fn fn, const Req& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    AddTraceMetadata(&ctx);
    Resp resp;
    const std::shared_ptr<Connection> conn = Conn();
    grpc::Status s = (conn->stub.get()->*fn)(&ctx, req, &resp);
    if (!s.ok()) return Failed(s, conn.get());
    return resp;
  }

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override {
    return Call<v1::CreateSessionRequest, v1::Session>(&Stub::CreateSession, req);
  }
  Result<v1::Session> GetSession(const std::string& id) override {
    v1::GetSessionRequest req;
    req.set_session_id(id);
    SINEW_ASSIGN_OR_RETURN(auto resp, (Call<v1::GetSessionRequest, v1::GetSessionResponse>(
                                          &Stub::GetSession, req)));
    return resp.session();
  }
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override {
    return Call<v1::ListSessionsRequest, v1::ListSessionsResponse>(&Stub::ListSessions, req);
  }
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override {
    return Call<v1::SetStatusRequest, v1::Session>(&Stub::SetStatus, req);
  }
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override {
    return Call<v1::AppendRequest, v1::AppendResponse>(&Stub::Append, req);
  }
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return Call<v1::GetEventsRequest, v1::GetEventsResponse>(&Stub::GetEvents, req);
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    if (!server_lacks_read_bytes_.load(std::memory_order_relaxed)) {
      auto r = Call<v1::ReadEventBytesRequest, v1::ReadEventBytesResponse>(&Stub::ReadEventBytes, req);
      if (r.ok() || r.status().code() != StatusCode::kUnimplemented) return r;
      // A sinew-store from before ReadEventBytes (a rolling upgrade): read through
      // GetEvents from now on, with the same pages.
      if (!server_lacks_read_bytes_.exchange(true)) {
        spdlog::warn("sinew-store at {} has no ReadEventBytes (an older version); reading events with GetEvents",
                     address_);
      }
    }
    return ReadEventBytesThroughGetEvents(req);
  }
  // ReadEventBytes' contract over GetEvents: the same range, limit and page budget; the
  // bytes are the events re-encoded by this client (they decode to the same events).
  Result<v1::ReadEventBytesResponse> ReadEventBytesThroughGetEvents(const v1::ReadEventBytesRequest& req) {
    if (req.max_bytes() > kMaxPageBytes) {
      return Status::InvalidArgument("max_bytes must be at most " + std::to_string(kMaxPageBytes));
    }
    if (req.limit() > kMaxEventLimit) {
      return Status::InvalidArgument("limit must be at most " + std::to_string(kMaxEventLimit));
    }
    const uint64_t max_bytes = req.max_bytes() == 0 ? kDefaultPageBytes : req.max_bytes();
    uint64_t left = req.limit() == 0 ? kMaxEventLimit : req.limit();
    v1::ReadEventBytesResponse out;
    uint64_t bytes = 0;
    v1::GetEventsRequest chunk;
    chunk.set_session_id(req.session_id());
    chunk.set_from_seq(req.from_seq());
    chunk.set_to_seq(req.to_seq());
    while (true) {
      chunk.set_limit(static_cast<uint32_t>(std::min<uint64_t>(left, 256)));
      SINEW_ASSIGN_OR_RETURN(v1::GetEventsResponse got, GetEvents(chunk));
      out.set_next_seq(got.next_seq());
      for (const v1::Event& ev : got.events()) {
        std::string encoded = ev.SerializeAsString();
        if (out.events_size() > 0 && bytes + encoded.size() > max_bytes) return out;
        if (out.events_size() == 0) out.set_first_seq(ev.seq());
        bytes += encoded.size();
        out.add_events(std::move(encoded));
        --left;
      }
      if (got.events().empty() || left == 0) return out;
      chunk.set_from_seq(got.events(got.events_size() - 1).seq() + 1);
      if (req.to_seq() != 0 && chunk.from_seq() > req.to_seq()) return out;
    }
  }

  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& id, uint64_t from) override {
    // Fail fast on an unknown session, as the embedded store does.
    SINEW_RETURN_IF_ERROR(GetSession(id).status());
    v1::WatchRequest req;
    req.set_session_id(id);
    req.set_from_seq(from);
    return std::unique_ptr<EventWatcher>(new RemoteWatcher(Conn(), req));
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override {
    v1::AcquireLeaseRequest req;
    req.set_session_id(id);
    req.set_owner(holder.owner);
    req.set_holder_url(holder.url);
    req.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, ttl.count())));
    return Call<v1::AcquireLeaseRequest, v1::Lease>(&Stub::AcquireLease, req);
  }
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override {
    v1::RenewLeaseRequest req;
    req.set_session_id(id);
    req.set_owner(owner);
    req.set_epoch(epoch);
    req.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, ttl.count())));
    return Call<v1::RenewLeaseRequest, v1::Lease>(&Stub::RenewLease, req);
  }
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override {
    v1::ReleaseLeaseRequest req;
    req.set_session_id(id);
    req.set_owner(owner);
    req.set_epoch(epoch);
    return Call<v1::ReleaseLeaseRequest, v1::ReleaseLeaseResponse>(&Stub::ReleaseLease, req)
        .status();
  }
  Status Checkpoint(const std::string& target_dir) override {
    v1::CheckpointRequest req;
    req.set_target_dir(target_dir);
    return Call<v1::CheckpointRequest, v1::CheckpointResponse>(&Stub::Checkpoint, req).status();
  }
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override {
    return Call<v1::AppendAuditRequest, v1::AuditRecord>(&Stub::AppendAudit, req);
  }
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override {
    return Call<v1::ListAuditRequest, v1::ListAuditResponse>(&Stub::ListAudit, req);
  }

  Status Ping() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
    ctx.set_wait_for_ready(true);
    v1::HealthResponse resp;
    grpc::Status s = Conn()->stub->Health(&ctx, v1::HealthRequest(), &resp);
    return FromGrpcStatus(s);
  }

 private:
  std::shared_ptr<Connection> Conn() {
    std::lock_guard<std::mutex> lock(mu_);
    return conn_;
  }
  // The status of a failed call. After UNAVAILABLE the channel is replaced (when `failed`
  // is still the current one): a channel that found the server down waits out a
  // reconnect backoff before it tries again, even once the server is back, while a new
  // channel connects on its first call. So the call after a restarted server listens
  // again reaches it (docs/scale-out.md, "One shard down"); callers pace their retries.
  Status Failed(const grpc::Status& s, const Connection* failed) {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      auto fresh = NewConnection(address_, options_);
      std::lock_guard<std::mutex> lock(mu_);
      if (fresh.ok() && conn_.get() == failed) conn_ = std::move(fresh).value();
    }
    return FromGrpcStatus(s);
  }

  const std::string address_;
  const RemoteOptions options_;
  std::atomic<bool> server_lacks_read_bytes_{false};  // it answered ReadEventBytes UNIMPLEMENTED
  std::mutex mu_;
  std::shared_ptr<Connection> conn_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<SessionStore>> ConnectSessionStore(const std::string& address,
                                                          const RemoteOptions& options) {
  if (address.empty()) return Status::InvalidArgument("store address is empty");
  SINEW_ASSIGN_OR_RETURN(auto conn, RemoteStore::NewConnection(address, options));
  auto store = std::make_unique<RemoteStore>(address, std::move(conn), options);
  if (!options.wait_for_server) return std::unique_ptr<SessionStore>(std::move(store));
  Status ping = store->Ping();
  if (!ping.ok()) {
    return Status::Unavailable("session store not reachable at " + address + " (" +
                               ping.message() + "); is sinew-store running there?");
  }
  return std::unique_ptr<SessionStore>(std::move(store));
}

}  // namespace sinew::store
