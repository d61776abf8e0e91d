// gRPC implementation of EtcdClient.
#include "sinew/coord/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <mutex>

#include "etcd/rpc.grpc.pb.h"
#include "sinew/grpc_status.h"
#include "sinew/grpc_tls.h"

namespace sinew::coord {

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

namespace {

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.lease = kv.lease();
  return out;
}

// Cancels the ClientContext of the Watch it is attached to.
class GrpcWatchHandle final : public EtcdClient::WatchHandle {
 public:
  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  // Returns false when already cancelled.
  bool Attach(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = ctx;
    return !cancelled_;
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = nullptr;
  }
  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

 private:
  std::mutex mu_;
  grpc::ClientContext* ctx_ = nullptr;  // guarded by mu_; the running Watch's
  bool cancelled_ = false;              // guarded by mu_
};

class GrpcEtcdClient final : public EtcdClient {
 public:
  GrpcEtcdClient(std::string endpoint, std::chrono::milliseconds timeout,
                 std::shared_ptr<grpc::ChannelCredentials> creds, std::string server_name)
      : endpoint_(std::move(endpoint)),
        timeout_(timeout),
        creds_(std::move(creds)),
        server_name_(std::move(server_name)),
        conn_(NewConnection()) {}

  const std::string& endpoint() const override { return endpoint_; }

  Result<int64_t> Put(std::string_view key, std::string_view value, int64_t lease) override {
    etcdserverpb::PutRequest req;
    req.set_key(std::string(key));
    req.set_value(std::string(value));
    req.set_lease(lease);
    etcdserverpb::PutResponse resp;
    SINEW_RETURN_IF_ERROR(
        Call("Put", [&](grpc::ClientContext* c) { return Conn()->kv->Put(c, req, &resp); }));
    return resp.header().revision();
  }

  Result<int64_t> CreateGuarded(std::string_view key, std::string_view guard, int64_t guard_mod_revision,
                                std::string_view value, int64_t lease) override {
    etcdserverpb::TxnRequest req;
    auto* absent = req.add_compare();
    absent->set_key(std::string(key));
    absent->set_target(etcdserverpb::Compare::CREATE);
    absent->set_result(etcdserverpb::Compare::EQUAL);
    absent->set_create_revision(0);
    auto* guarded = req.add_compare();
    guarded->set_key(std::string(guard));
    guarded->set_target(etcdserverpb::Compare::MOD);
    guarded->set_result(etcdserverpb::Compare::EQUAL);
    guarded->set_mod_revision(guard_mod_revision);
    auto* put = req.add_success()->mutable_request_put();
    put->set_key(std::string(key));
    put->set_value(std::string(value));
    put->set_lease(lease);
    auto* put_guard = req.add_success()->mutable_request_put();
    put_guard->set_key(std::string(guard));
    put_guard->set_value(std::string(value));
    etcdserverpb::TxnResponse resp;
    SINEW_RETURN_IF_ERROR(Call("Txn", [&](grpc::ClientContext* c) { return Conn()->kv->Txn(c, req, &resp); }));
    return resp.succeeded() ? resp.header().revision() : 0;
  }

  Result<Listing> GetPrefix(std::string_view prefix) override {
    etcdserverpb::RangeRequest req;
    req.set_key(std::string(prefix));
    req.set_range_end(PrefixEnd(prefix));
    etcdserverpb::RangeResponse resp;
    SINEW_RETURN_IF_ERROR(
        Call("Range", [&](grpc::ClientContext* c) { return Conn()->kv->Range(c, req, &resp); }));
    Listing out;
    out.revision = resp.header().revision();
    out.kvs.reserve(static_cast<size_t>(resp.kvs_size()));
    for (const auto& kv : resp.kvs()) out.kvs.push_back(FromPb(kv));
    return out;
  }

  Result<int64_t> Delete(std::string_view key) override {
    etcdserverpb::DeleteRangeRequest req;
    req.set_key(std::string(key));
    etcdserverpb::DeleteRangeResponse resp;
    SINEW_RETURN_IF_ERROR(Call("DeleteRange", [&](grpc::ClientContext* c) {
      return Conn()->kv->DeleteRange(c, req, &resp);
    }));
    return resp.deleted();
  }

  Result<Lease> GrantLease(int64_t ttl_seconds) override {
    if (ttl_seconds <= 0) return Status::InvalidArgument("lease TTL must be positive");
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(ttl_seconds);
    etcdserverpb::LeaseGrantResponse resp;
    SINEW_RETURN_IF_ERROR(Call("LeaseGrant", [&](grpc::ClientContext* c) {
      return Conn()->lease->LeaseGrant(c, req, &resp);
    }));
    if (!resp.error().empty()) return Status::Unavailable("etcd LeaseGrant: " + resp.error());
    return Lease{resp.id(), resp.ttl()};
  }

  Result<int64_t> KeepAliveOnce(int64_t lease_id) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    auto conn = Conn();
    auto stream = conn->lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease_id);
    etcdserverpb::LeaseKeepAliveResponse resp;
    bool got = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    if (!got) {
      ctx.TryCancel();
      grpc::Status s = stream->Finish();
      if (s.ok())
        return Status::Unavailable("etcd LeaseKeepAlive: the stream ended without an answer");
      return Failed(s, "LeaseKeepAlive", conn.get());
    }
    ctx.TryCancel();  // one answer is all we wanted
    (void)stream->Finish();
    return resp.ttl() > 0 ? resp.ttl() : 0;
  }

  Status RevokeLease(int64_t lease_id) override {
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(lease_id);
    etcdserverpb::LeaseRevokeResponse resp;
    return Call("LeaseRevoke",
                [&](grpc::ClientContext* c) { return Conn()->lease->LeaseRevoke(c, req, &resp); });
  }

  Status Compact(int64_t revision) override {
    etcdserverpb::CompactionRequest req;
    req.set_revision(revision);
    req.set_physical(true);
    etcdserverpb::CompactionResponse resp;
    return Call("Compact",
                [&](grpc::ClientContext* c) { return Conn()->kv->Compact(c, req, &resp); });
  }

  std::unique_ptr<WatchHandle> NewWatchHandle() override {
    return std::make_unique<GrpcWatchHandle>();
  }

  Status Watch(std::string_view prefix, int64_t start_revision, WatchHandle* handle,
               const EventsFn& on_events, int64_t* compact_revision) override {
    auto* h = static_cast<GrpcWatchHandle*>(handle);
    grpc::ClientContext ctx;
    if (!h->Attach(&ctx)) return Status::Ok();
    auto conn = Conn();
    auto stream = conn->watch->Watch(&ctx);
    etcdserverpb::WatchRequest req;
    auto* create = req.mutable_create_request();
    create->set_key(std::string(prefix));
    create->set_range_end(PrefixEnd(prefix));
    create->set_start_revision(start_revision);
    Status result = Status::Ok();
    if (!stream->Write(req)) {
      Renew(conn.get());
      result = Status::Unavailable("etcd Watch: could not send the request");
    } else {
      etcdserverpb::WatchResponse resp;
      std::vector<WatchEvent> batch;
      while (stream->Read(&resp)) {
        if (resp.canceled()) {
          if (resp.compact_revision() > 0) {
            if (compact_revision != nullptr) *compact_revision = resp.compact_revision();
            result = Status::OutOfRange(
                "etcd Watch: revision " + std::to_string(start_revision) +
                " is compacted (oldest kept: " + std::to_string(resp.compact_revision()) + ")");
          } else {
            result = Status::Unavailable("etcd Watch cancelled: " + resp.cancel_reason());
          }
          break;
        }
        if (resp.events_size() == 0) continue;  // created / progress
        batch.clear();
        for (const auto& ev : resp.events()) {
          WatchEvent w;
          w.deleted = ev.type() == mvccpb::Event::DELETE;
          w.kv = FromPb(ev.kv());
          batch.push_back(std::move(w));
        }
        if (!on_events(batch, resp.header().revision())) break;
      }
      ctx.TryCancel();
      grpc::Status s = stream->Finish();
      if (result.ok() && !h->cancelled() && !s.ok() &&
          s.error_code() != grpc::StatusCode::CANCELLED) {
        result = Failed(s, "Watch", conn.get());
      } else if (result.ok() && !h->cancelled() && s.ok()) {
        result = Status::Unavailable("etcd Watch: the stream ended");
      }
    }
    h->Detach();
    if (h->cancelled()) return Status::Ok();
    return result;
  }

 private:
  // A channel and its stubs. Replaced after a call fails with UNAVAILABLE or passes its
  // deadline: a channel
  // that found etcd down backs off for seconds before it tries again, even once etcd is
  // back; a new channel connects at once (callers pace their retries).
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  std::shared_ptr<Connection> NewConnection() const {
    grpc::ChannelArguments args;
    // Notice a dead etcd on an idle watch stream (etcd refuses pings more often than 5 s).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // A fresh channel per connection (no sharing of subchannels with an old one).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // A channel that lost etcd tries again at least every second, not after gRPC's
    // backoff of up to 120 s.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    if (!server_name_.empty()) args.SetSslTargetNameOverride(server_name_);
    auto channel = grpc::CreateCustomChannel(endpoint_, creds_, args);
    auto c = std::make_shared<Connection>();
    c->kv = etcdserverpb::KV::NewStub(channel);
    c->lease = etcdserverpb::Lease::NewStub(channel);
    c->watch = etcdserverpb::Watch::NewStub(channel);
    c->channel = std::move(channel);
    return c;
  }
  std::shared_ptr<Connection> Conn() {
    std::lock_guard<std::mutex> lock(mu_);
    return conn_;
  }
  // Replaces `failed` (if it is still the current connection) by a new one.
  void Renew(const Connection* failed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (conn_.get() == failed) conn_ = NewConnection();
  }
  Status Failed(const grpc::Status& s, std::string_view what, const Connection* conn) {
    // A call past its deadline may sit on a connection cut without a word (a partition).
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      Renew(conn);
    }
    return FromGrpcStatus(s).WithContext("etcd " + std::string(what));
  }

  template <typename Fn>
  Status Call(std::string_view what, Fn&& fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const Connection* before = Conn().get();
    grpc::Status s = fn(&ctx);
    if (!s.ok()) return Failed(s, what, before);
    return Status::Ok();
  }

  // Constant after construction.
  const std::string endpoint_;
  const std::chrono::milliseconds timeout_;
  // Plain, or TLS with file-watched certificates (shared by every connection).
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  const std::string server_name_;  // the name etcd's certificate must carry, "" for the host

  std::mutex mu_;
  std::shared_ptr<Connection> conn_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const std::string& endpoint,
                                                        std::chrono::milliseconds call_timeout,
                                                        const GrpcTlsOptions& tls) {
  if (endpoint.empty()) return Status::InvalidArgument("etcd endpoint is empty");
  if (endpoint.find(':') == std::string::npos) {
    return Status::InvalidArgument("etcd endpoint '" + endpoint + "' must be host:port");
  }
  auto creds = GrpcChannelCredentials(tls);
  if (!creds.ok()) return creds.status().WithContext("etcd TLS");
  return std::unique_ptr<EtcdClient>(new GrpcEtcdClient(endpoint, call_timeout, std::move(creds).value(),
                                                        tls.enabled() ? tls.server_name_override : ""));
}

}  // namespace sinew::coord
