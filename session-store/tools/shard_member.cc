#include "shard_member.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "sinew/grpc_tls.h"

namespace sinew::store {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kPrimaryPrefix = "/sinew/store-primaries/";
// A primary stops acknowledging this long before its lease could have run out.
constexpr auto kSafetyMargin = std::chrono::seconds(1);
constexpr auto kPoll = std::chrono::milliseconds(200);

// The term a directory's log is complete for: the term it led, or the term of the primary
// it followed and caught up with. Kept in <db>/TERM; 0 when there is none.
int64_t ReadTerm(const std::string& db) {
  std::ifstream in(db + "/TERM");
  int64_t term = 0;
  if (in) in >> term;
  return in ? term : 0;
}

Status WriteTerm(const std::string& db, int64_t term) {
  const std::string tmp = db + "/TERM.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << term << "\n";
    if (!out.flush()) return Status::IOError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, db + "/TERM", ec);
  if (ec) return Status::IOError("cannot write " + db + "/TERM: " + ec.message());
  return Status::Ok();
}

}  // namespace

// The store gRPC serves: the primary while this member leads (and its lease is surely
// still held), else refusals that name the primary.
class ShardMember::Switch final : public SessionStore {
 public:
  explicit Switch(std::string shard) : shard_(std::move(shard)) {}

  void Lead(std::shared_ptr<Primary> primary) {
    std::lock_guard<std::mutex> lock(mu_);
    primary_ = std::move(primary);
  }
  void Follow(std::string primary_address) {
    std::lock_guard<std::mutex> lock(mu_);
    primary_.reset();
    primary_address_ = std::move(primary_address);
  }
  // Acknowledgements stop at `deadline` unless it is pushed back (the lease renewed).
  void HoldUntil(Clock::time_point deadline) { deadline_ns_ = deadline.time_since_epoch().count(); }
  std::shared_ptr<Primary> primary() {
    std::lock_guard<std::mutex> lock(mu_);
    return primary_;
  }

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override {
    return Write<v1::Session>([&](SessionStore* s) { return s->CreateSession(req); });
  }
  Result<v1::Session> GetSession(const std::string& id) override {
    return Read<v1::Session>([&](SessionStore* s) { return s->GetSession(id); });
  }
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override {
    return Read<v1::ListSessionsResponse>([&](SessionStore* s) { return s->ListSessions(req); });
  }
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override {
    return Write<v1::Session>([&](SessionStore* s) { return s->SetStatus(req); });
  }
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override {
    return Write<v1::AppendResponse>([&](SessionStore* s) { return s->Append(req); });
  }
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return Read<v1::GetEventsResponse>([&](SessionStore* s) { return s->GetEvents(req); });
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    return Read<v1::ReadEventBytesResponse>([&](SessionStore* s) { return s->ReadEventBytes(req); });
  }
  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& id, uint64_t from_seq) override {
    return Read<std::unique_ptr<EventWatcher>>([&](SessionStore* s) { return s->Watch(id, from_seq); });
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override {
    return Write<v1::Lease>([&](SessionStore* s) { return s->AcquireLease(id, holder, ttl); });
  }
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override {
    return Write<v1::Lease>([&](SessionStore* s) { return s->RenewLease(id, owner, epoch, ttl); });
  }
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override {
    return Write<bool>([&](SessionStore* s) -> Result<bool> {
             SINEW_RETURN_IF_ERROR(s->ReleaseLease(id, owner, epoch));
             return true;
           })
        .status();
  }
  Status Checkpoint(const std::string& target_dir) override {
    return Read<bool>([&](SessionStore* s) -> Result<bool> {
             SINEW_RETURN_IF_ERROR(s->Checkpoint(target_dir));
             return true;
           })
        .status();
  }
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override {
    return Write<v1::AuditRecord>([&](SessionStore* s) { return s->AppendAudit(req); });
  }
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override {
    return Read<v1::ListAuditResponse>([&](SessionStore* s) { return s->ListAudit(req); });
  }

 private:
  std::string NotPrimary() {
    std::lock_guard<std::mutex> lock(mu_);
    return "this sinew-store is not the primary of store shard '" + shard_ + "'" +
           (primary_address_.empty() ? std::string(" (an election is under way)")
                                     : "; its primary is at " + primary_address_);
  }
  template <typename T, typename Fn>
  Result<T> Read(Fn&& fn) {
    auto p = primary();
    if (!p) return Status::Unavailable(NotPrimary());
    return fn(p->store());
  }
  // A write done past the deadline is not acknowledged: another member may lead by now.
  template <typename T, typename Fn>
  Result<T> Write(Fn&& fn) {
    auto p = primary();
    if (!p || Clock::now().time_since_epoch().count() >= deadline_ns_.load()) return Status::Unavailable(NotPrimary());
    Result<T> out = fn(p->store());
    if (out.ok() && Clock::now().time_since_epoch().count() >= deadline_ns_.load()) {
      return Status::Unavailable("store shard '" + shard_ +
                                 "': this primary's etcd lease may have run out during the write, which may or may "
                                 "not be kept; retry it with the same idempotency key");
    }
    return out;
  }

  const std::string shard_;
  std::mutex mu_;
  std::shared_ptr<Primary> primary_;  // guarded by mu_
  std::string primary_address_;       // guarded by mu_
  std::atomic<int64_t> deadline_ns_{0};
};

// sinew.v1.StoreReplication for the primary of the moment.
class ShardMember::ForwardingReplication final : public v1::StoreReplication::Service {
 public:
  explicit ForwardingReplication(Switch* sw) : switch_(sw) {}
  grpc::Status Replicate(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::ReplicatedBatch, v1::ReplicationAck>* stream) override {
    auto p = switch_->primary();
    if (!p) return {grpc::StatusCode::UNAVAILABLE, "this sinew-store is not its shard's primary"};
    return static_cast<v1::StoreReplication::Service*>(p->service())->Replicate(ctx, stream);
  }
  grpc::Status GetReplicationStatus(grpc::ServerContext* ctx, const v1::GetReplicationStatusRequest* req,
                                    v1::ReplicationStatus* out) override {
    auto p = switch_->primary();
    if (!p) return {grpc::StatusCode::UNAVAILABLE, "this sinew-store is not its shard's primary"};
    return static_cast<v1::StoreReplication::Service*>(p->service())->GetReplicationStatus(ctx, req, out);
  }

 private:
  Switch* switch_;
};

ShardMember::ShardMember(coord::EtcdClient* etcd, Options options)
    : etcd_(etcd),
      options_(std::move(options)),
      key_(std::string(kPrimaryPrefix) + options_.shard_id),
      switch_(std::make_unique<Switch>(options_.shard_id)),
      replication_(std::make_unique<ForwardingReplication>(switch_.get())) {}

ShardMember::~ShardMember() = default;

void ShardMember::SetAdvertise(std::string advertise, std::function<Status()> on_lead) {
  advertise_ = std::move(advertise);
  on_lead_ = std::move(on_lead);
}

SessionStore* ShardMember::store() { return switch_.get(); }
v1::StoreReplication::Service* ShardMember::replication_service() { return replication_.get(); }
std::shared_ptr<Primary> ShardMember::primary() { return switch_->primary(); }

Status ShardMember::Run(const std::atomic<bool>* stop) {
  const std::string last_key = key_ + "/last";  // the last winner, kept without a lease
  while (!*stop) {
    auto listing = etcd_->GetPrefix(key_);
    if (!listing.ok()) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    const coord::KeyValue* primary = nullptr;
    const coord::KeyValue* last = nullptr;
    for (const auto& kv : listing->kvs) {
      if (kv.key == key_) primary = &kv;
      if (kv.key == last_key) last = &kv;
    }
    if (primary != nullptr) {
      if (primary->value == advertise_) {
        // This member's own key from a life that ended: wait for its lease to run out.
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      SINEW_RETURN_IF_ERROR(Follow(*primary, stop));
      continue;
    }
    // Only a directory that is complete for the last term may lead the next one.
    const int64_t last_term = last != nullptr ? last->mod_revision : 0;
    if (const int64_t mine = ReadTerm(options_.db); mine != last_term) {
      spdlog::info("store shard '{}': no primary; this member holds term {}, the last was {}: it waits for an "
                   "up-to-date member to lead", options_.shard_id, mine, last_term);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    auto lease = etcd_->GrantLease(options_.ttl_seconds);
    if (!lease.ok()) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    const Clock::time_point granted = Clock::now();
    auto term = etcd_->CreateGuarded(key_, last_key, last_term, advertise_, lease->id);
    if (!term.ok() || *term == 0) {
      (void)etcd_->RevokeLease(lease->id);
      continue;  // another won (or etcd did not answer): look again
    }
    switch_->HoldUntil(granted + std::chrono::seconds(lease->ttl_seconds) - kSafetyMargin);
    return Lead(lease->id, *term, stop);
  }
  return Status::Ok();
}

Status ShardMember::Lead(int64_t lease_id, int64_t term, const std::atomic<bool>* stop) {
  std::error_code ec;
  std::filesystem::create_directories(options_.db, ec);
  SINEW_RETURN_IF_ERROR(WriteTerm(options_.db, term));
  if (std::ofstream marker(options_.db + "/PRIMARY"); !(marker << term << "\n")) {
    return Status::IOError("cannot write " + options_.db + "/PRIMARY");
  }
  auto opened = OpenPrimaryStore(options_.db, options_.store, options_.primary);
  if (!opened.ok()) {
    (void)etcd_->RevokeLease(lease_id);
    return opened.status();
  }
  switch_->Lead(std::shared_ptr<Primary>(std::move(*opened)));
  if (on_lead_) {
    if (Status s = on_lead_(); !s.ok()) spdlog::warn("store shard '{}': {}", options_.shard_id, s.ToString());
  }
  spdlog::info("store shard '{}': primary at term {} ({})", options_.shard_id, term, advertise_);
  const auto every = std::chrono::milliseconds(options_.ttl_seconds * 1000 / 3);
  while (!*stop) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(every, kPoll * 5));
    const Clock::time_point sent = Clock::now();
    auto ttl = etcd_->KeepAliveOnce(lease_id);
    if (ttl.ok() && *ttl > 0) {
      switch_->HoldUntil(sent + std::chrono::seconds(*ttl) - kSafetyMargin);
      continue;
    }
    if (ttl.ok()) {
      switch_->Follow("");
      return Status::Aborted("store shard '" + options_.shard_id + "': the primary's etcd lease at term " +
                             std::to_string(term) + " is gone; this member is deposed");
    }
    // etcd did not answer: keep trying until the deadline passes, then step down.
  }
  switch_->Follow("");
  (void)etcd_->RevokeLease(lease_id);  // a clean stop hands the shard over at once
  return Status::Ok();
}

Status ShardMember::Follow(const coord::KeyValue& primary, const std::atomic<bool>* stop) {
  SINEW_RETURN_IF_ERROR(SetAsideIfDeposed(primary.create_revision));
  switch_->Follow(primary.value);
  FollowerOptions fo;
  fo.name = advertise_;
  fo.tls = options_.follow_tls;
  SINEW_ASSIGN_OR_RETURN(auto follower, Follower::Start(options_.db, primary.value, fo));
  spdlog::info("store shard '{}': following the primary at {} (term {})", options_.shard_id, primary.value,
               primary.create_revision);
  // The term is this directory's once it holds everything the primary had written when
  // the stream began (in sync mode, everything acknowledged before it).
  std::optional<uint64_t> target;  // the primary's last sequence number when the stream began
  bool complete = ReadTerm(options_.db) == primary.create_revision;
  SINEW_ASSIGN_OR_RETURN(auto channel, GrpcChannel(primary.value, options_.follow_tls));
  auto stub = v1::StoreReplication::NewStub(channel);
  while (!*stop) {
    if (!complete) {
      if (!target) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        v1::ReplicationStatus status;
        if (stub->GetReplicationStatus(&ctx, {}, &status).ok()) target = status.latest_sequence();
      }
      if (target && follower->AppliedSequence() >= *target) {
        SINEW_RETURN_IF_ERROR(WriteTerm(options_.db, primary.create_revision));
        complete = true;
      }
    }
    std::this_thread::sleep_for(kPoll);
    auto listing = etcd_->GetPrefix(key_);
    if (!listing.ok()) continue;  // etcd away: keep following
    bool same = false;
    for (const auto& kv : listing->kvs) {
      if (kv.key == key_ && kv.create_revision == primary.create_revision) same = true;
    }
    if (!same) break;  // the primary's lease ran out (or another leads): campaign again
  }
  return Status::Ok();  // the follower closes the directory as it goes
}

Status ShardMember::SetAsideIfDeposed(int64_t current_term) {
  const int64_t mine = ReadTerm(options_.db);
  // A directory that led a term it no longer follows may hold writes no follower has.
  std::error_code ec;
  if (mine == 0 || mine == current_term || !std::filesystem::exists(options_.db + "/PRIMARY")) return Status::Ok();
  const std::string aside = options_.db + ".deposed-" + std::to_string(mine);
  std::filesystem::rename(options_.db, aside, ec);
  if (ec) return Status::IOError("cannot set aside " + options_.db + ": " + ec.message());
  spdlog::warn("store shard '{}': {} led term {} and may hold writes nobody acknowledged; set aside as {}, "
               "following term {} from an empty directory", options_.shard_id, options_.db, mine, aside,
               current_term);
  return Status::Ok();
}

}  // namespace sinew::store
