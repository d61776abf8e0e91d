#include "shard_member.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "sinew/grpc_tls.h"

namespace sinew::store {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kPrimaryPrefix = "/sinew/store-primaries/";
// A primary stops acknowledging this long before its lease could have run out.
constexpr auto kSafetyMargin = std::chrono::seconds(1);
constexpr auto kPoll = std::chrono::milliseconds(200);

// A term kept in a file of the directory; 0 when there is none.
int64_t ReadTermFile(const std::string& db, const std::string& name) {
  std::ifstream in(db + "/" + name);
  int64_t term = 0;
  if (in) in >> term;
  return in ? term : 0;
}

Status WriteTermFile(const std::string& db, const std::string& name, int64_t term) {
  const std::string tmp = db + "/" + name + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << term << "\n";
    if (!out.flush()) return Status::IOError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, db + "/" + name, ec);
  if (ec) return Status::IOError("cannot write " + db + "/" + name + ": " + ec.message());
  return Status::Ok();
}

// The term a directory's log is complete for: the term it led, or the term of the primary
// it followed and caught up with. Kept in <db>/TERM.
int64_t ReadTerm(const std::string& db) { return ReadTermFile(db, "TERM"); }
Status WriteTerm(const std::string& db, int64_t term) { return WriteTermFile(db, "TERM", term); }
// The term of the primary whose batches the directory last received (complete or not):
// whatever it holds past that term's start came from that primary. Kept in <db>/FOLLOWS.
constexpr const char* kFollows = "FOLLOWS";

// "<term> <sequence> following|campaigning", the value of a member's progress key.
std::string ProgressValue(int64_t term, uint64_t sequence, bool campaigning) {
  return std::to_string(term) + " " + std::to_string(sequence) + (campaigning ? " campaigning" : " following");
}

std::optional<MemberProgress> ParseProgress(std::string name, const std::string& value) {
  std::istringstream in(value);
  MemberProgress p;
  std::string state;
  if (!(in >> p.term >> p.sequence >> state) || (state != "following" && state != "campaigning")) return std::nullopt;
  p.name = std::move(name);
  p.campaigning = state == "campaigning";
  return p;
}

}  // namespace

std::string WaitsFor(const std::vector<MemberProgress>& others, int64_t term, uint64_t sequence) {
  for (const auto& p : others) {
    // Its record may lag behind its copy (it is republished every poll): it may be
    // complete for the term and ahead by now.
    if (!p.campaigning) return p.name + " (still following)";
    if (p.term != term) continue;  // not complete for this term: it never leads it
    if (p.sequence > sequence) {
      return p.name + " (term " + std::to_string(term) + ", sequence " + std::to_string(p.sequence) + ")";
    }
  }
  return "";
}

// This member's progress key, under an etcd lease of its own that Publish renews. Best
// effort: while etcd does not answer, the next call tries again.
class ShardMember::Progress {
 public:
  Progress(coord::EtcdClient* etcd, std::string key, int64_t ttl_seconds)
      : etcd_(etcd), key_(std::move(key)), ttl_seconds_(ttl_seconds) {}

  void Publish(int64_t term, uint64_t sequence, bool campaigning) {
    const Clock::time_point now = Clock::now();
    if (lease_ != 0 && now - renewed_ >= std::chrono::seconds(ttl_seconds_) / 3) {
      auto ttl = etcd_->KeepAliveOnce(lease_);
      if (!ttl.ok()) return;
      if (*ttl == 0) lease_ = 0;  // it ran out (this process was frozen, or etcd lost it)
      renewed_ = now;
    }
    if (lease_ == 0) {
      auto lease = etcd_->GrantLease(ttl_seconds_);
      if (!lease.ok()) return;
      lease_ = lease->id;
      renewed_ = now;
      value_.clear();
    }
    const std::string value = ProgressValue(term, sequence, campaigning);
    if (value == value_) return;
    if (etcd_->Put(key_, value, lease_).ok()) value_ = value;
  }
  // While this member leads: its progress is the primary's own.
  void Withdraw() {
    if (lease_ != 0) (void)etcd_->RevokeLease(lease_);
    lease_ = 0;
    value_.clear();
  }

 private:
  coord::EtcdClient* etcd_;
  const std::string key_;
  const int64_t ttl_seconds_;
  int64_t lease_ = 0;
  Clock::time_point renewed_{};
  std::string value_;  // as last put
};

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
  grpc::Status Seed(grpc::ServerContext* ctx, const v1::SeedRequest* req,
                    grpc::ServerWriter<v1::SeedChunk>* out) override {
    auto p = switch_->primary();
    if (!p) return {grpc::StatusCode::UNAVAILABLE, "this sinew-store is not its shard's primary"};
    return static_cast<v1::StoreReplication::Service*>(p->service())->Seed(ctx, req, out);
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
  progress_ = std::make_unique<Progress>(etcd_, key_ + "/members/" + advertise_, options_.member_ttl_seconds);
}

SessionStore* ShardMember::store() { return switch_.get(); }
v1::StoreReplication::Service* ShardMember::replication_service() { return replication_.get(); }
std::shared_ptr<Primary> ShardMember::primary() { return switch_->primary(); }

Status ShardMember::Run(const std::atomic<bool>* stop) {
  const std::string last_key = key_ + "/last";  // the last winner, kept without a lease
  const std::string members_prefix = key_ + "/members/";
  // How far this directory goes, read once it stops following (kUnread until then).
  constexpr uint64_t kUnread = ~uint64_t{0};
  uint64_t mine = kUnread;
  std::string waiting;           // why this member last held back (logged when it changes)
  auto hold_back = [&](std::string why, std::chrono::milliseconds pause) {
    if (why != waiting) spdlog::info("store shard '{}': no primary; {}", options_.shard_id, why);
    waiting = std::move(why);
    std::this_thread::sleep_for(pause);
  };
  while (!*stop) {
    auto listing = etcd_->GetPrefix(key_);
    if (!listing.ok()) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    const coord::KeyValue* primary = nullptr;
    const coord::KeyValue* last = nullptr;
    std::vector<MemberProgress> others;
    for (const auto& kv : listing->kvs) {
      if (kv.key == key_) primary = &kv;
      if (kv.key == last_key) last = &kv;
    }
    for (const auto& kv : listing->kvs) {
      if (kv.key.rfind(members_prefix, 0) != 0) continue;
      std::string name = kv.key.substr(members_prefix.size());
      if (name == advertise_ || (last != nullptr && name == last->value)) continue;
      if (auto p = ParseProgress(std::move(name), kv.value)) others.push_back(std::move(*p));
    }
    if (primary != nullptr) {
      if (primary->value == advertise_) {
        // This member's own key from a life that ended: wait for its lease to run out.
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      waiting.clear();
      mine = kUnread;
      SINEW_RETURN_IF_ERROR(Follow(*primary, stop));
      continue;
    }
    if (mine == kUnread) {
      auto stored = StoredSequence(options_.db);
      if (!stored.ok()) return stored.status();
      mine = *stored;
    }
    // Only a directory that is complete for the last term may lead the next one.
    const int64_t last_term = last != nullptr ? last->mod_revision : 0;
    const int64_t term_held = ReadTerm(options_.db);
    progress_->Publish(term_held, mine, /*campaigning=*/true);
    if (term_held != last_term) {
      hold_back("this member holds term " + std::to_string(term_held) + ", the last was " +
                    std::to_string(last_term) + ": it waits for an up-to-date member to lead",
                std::chrono::seconds(1));
      continue;
    }
    // ... and the most advanced of those: every write acknowledged in sync mode is on it.
    if (std::string ahead = WaitsFor(others, last_term, mine); !ahead.empty()) {
      hold_back("this member holds sequence " + std::to_string(mine) + " of term " + std::to_string(last_term) +
                    "; it waits for " + ahead,
                kPoll);
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
    progress_->Withdraw();
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
  // Where this term's log parts from the last one's: a member that holds more than this
  // of an older term holds writes this primary never had (TermStart).
  const std::string start_key = key_ + "/start";
  const std::string start_value = std::to_string(term) + " " + std::to_string((*opened)->LatestSequence());
  bool start_published = etcd_->Put(start_key, start_value).ok();
  switch_->Lead(std::shared_ptr<Primary>(std::move(*opened)));
  if (on_lead_) {
    if (Status s = on_lead_(); !s.ok()) spdlog::warn("store shard '{}': {}", options_.shard_id, s.ToString());
  }
  spdlog::info("store shard '{}': primary at term {} ({})", options_.shard_id, term, advertise_);
  const auto every = std::chrono::milliseconds(options_.ttl_seconds * 1000 / 3);
  while (!*stop) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(every, kPoll * 5));
    if (!start_published) start_published = etcd_->Put(start_key, start_value).ok();
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
  if (ReadTerm(options_.db) != primary.create_revision &&
      ReadTermFile(options_.db, kFollows) != primary.create_revision) {
    const std::optional<uint64_t> start = TermStart(primary.create_revision);
    if (!start) {
      std::this_thread::sleep_for(kPoll);  // the new primary has not said it yet
      return Status::Ok();
    }
    SINEW_RETURN_IF_ERROR(SetAsideIfAhead(primary.create_revision, *start));
  }
  switch_->Follow(primary.value);
  // The term is this directory's once it holds everything the primary had written when
  // the stream began: from then on the primary counts its fsyncs for sync mode, so it is
  // recorded before the first of those is acknowledged.
  const int64_t term = primary.create_revision;
  std::atomic<bool> complete{ReadTerm(options_.db) == term};
  FollowerOptions fo;
  fo.name = advertise_;
  fo.tls = options_.follow_tls;
  fo.keep_files = {"SHARD", "TERM", kFollows};
  fo.on_caught_up = [&]() -> Status {
    if (complete) return Status::Ok();
    SINEW_RETURN_IF_ERROR(WriteTerm(options_.db, term));
    // A copy complete for this term is no deposed primary's, whatever it led before.
    std::error_code ec;
    std::filesystem::remove(options_.db + "/PRIMARY", ec);
    complete = true;
    return Status::Ok();
  };
  // Before the first batch: Follower::Start only opens (or creates) the directory.
  std::error_code ec;
  std::filesystem::create_directories(options_.db, ec);
  SINEW_RETURN_IF_ERROR(WriteTermFile(options_.db, kFollows, term));
  SINEW_ASSIGN_OR_RETURN(auto follower, Follower::Start(options_.db, primary.value, fo));
  spdlog::info("store shard '{}': following the primary at {} (term {})", options_.shard_id, primary.value, term);
  while (!*stop) {
    progress_->Publish(complete ? term : ReadTerm(options_.db), follower->AppliedSequence(), /*campaigning=*/false);
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

std::optional<uint64_t> ShardMember::TermStart(int64_t term) {
  auto listing = etcd_->GetPrefix(key_ + "/start");
  if (!listing.ok()) return std::nullopt;
  for (const auto& kv : listing->kvs) {
    if (kv.key != key_ + "/start") continue;
    std::istringstream in(kv.value);
    int64_t t = 0;
    uint64_t sequence = 0;
    if (in >> t >> sequence && t == term) return sequence;
  }
  return std::nullopt;
}

Status ShardMember::SetAsideIfAhead(int64_t term, uint64_t start) {
  SINEW_ASSIGN_OR_RETURN(const uint64_t mine, StoredSequence(options_.db));
  if (mine <= start) return Status::Ok();
  std::string aside = options_.db + ".diverged-" + std::to_string(term);
  for (int n = 2; std::filesystem::exists(aside); ++n) {
    aside = options_.db + ".diverged-" + std::to_string(term) + "-" + std::to_string(n);
  }
  std::error_code ec;
  std::filesystem::rename(options_.db, aside, ec);
  if (ec) return Status::IOError("cannot set aside " + options_.db + ": " + ec.message());
  spdlog::warn("store shard '{}': {} holds sequence {}, past {} where term {} began, so it holds writes the "
               "primary never had; set aside as {}, following term {} from an empty directory",
               options_.shard_id, options_.db, mine, start, term, aside, term);
  return Status::Ok();
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
