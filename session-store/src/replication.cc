// A shard's primary (a store that waits for its followers) and its followers.
#include "sinew/session_store/replication.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "replication_seed.h"
#include "rocks_store.h"
#include "store_channel.h"
#include "sinew/grpc_status.h"
#include "sinew/grpc_tls.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/session_store/store_service.h"

namespace sinew::store {
namespace {

// What the primary knows of its followers: how far each has synced, and how far the log
// goes (streams wait on it for new batches, writers for a follower to catch up).
//
// An in-sync follower that syncs nothing for `stall_limit` while the log holds batches
// it has not synced is no longer in sync (its link may be dead without a word: a
// partition drops packets, it does not close connections); it is in sync again once it
// has synced what the log held then. Only a follower that makes no progress at all is
// dropped this way: a slow one that keeps syncing stays, and writes wait for it.
class FollowerBook {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FollowerBook(std::chrono::milliseconds stall_limit) : stall_limit_(stall_limit) {}

  // Registers a stream that has synced `synced` and is in sync once it has synced
  // `in_sync_from`; returns its key.
  uint64_t Add(const std::string& name, uint64_t synced, uint64_t in_sync_from) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t key = ++next_key_;
    followers_[key] = {{name, synced, synced >= in_sync_from}, in_sync_from, Clock::now()};
    cv_.notify_all();
    return key;
  }
  void Remove(uint64_t key) {
    std::lock_guard<std::mutex> lock(mu_);
    followers_.erase(key);
    cv_.notify_all();
  }
  void Synced(uint64_t key, uint64_t sequence) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = followers_.find(key);
    if (it != followers_.end() && sequence > it->second.status.synced_sequence) {
      it->second.status.synced_sequence = sequence;
      it->second.status.in_sync = sequence >= it->second.in_sync_from;
      it->second.progress = Clock::now();
      cv_.notify_all();
    }
  }
  // The log grew to `sequence`: wakes the streams.
  void Written(uint64_t sequence) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sequence > written_) {
      written_ = sequence;
      cv_.notify_all();
    }
    DropStalled();
  }
  // Wakes every waiter to look again (a stream's follower left).
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  // Waits until some in-sync follower has synced `sequence`; false after `timeout`.
  bool AwaitSynced(uint64_t sequence, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool synced = cv_.wait_for(lock, timeout, [&] {
      for (const auto& [key, f] : followers_) {
        if (f.status.in_sync && f.status.synced_sequence >= sequence) return true;
      }
      return false;
    });
    if (!synced) DropStalled();
    return synced;
  }
  // Waits until the log goes past `sequence - 1` or `timeout` passes.
  void AwaitWritten(uint64_t sequence, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return written_ >= sequence; });
  }
  bool AnyInSync() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, f] : followers_) {
      if (f.status.in_sync) return true;
    }
    return false;
  }
  std::vector<FollowerStatus> List() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<FollowerStatus> out;
    for (const auto& [key, f] : followers_) out.push_back(f.status);
    return out;
  }

 private:
  // Takes the in-sync status from followers stalled past stall_limit_. Holds mu_.
  void DropStalled() {
    const Clock::time_point now = Clock::now();
    for (auto& [key, f] : followers_) {
      if (!f.status.in_sync || f.status.synced_sequence >= written_ || now - f.progress < stall_limit_) continue;
      f.status.in_sync = false;
      f.in_sync_from = written_;
      spdlog::warn("replication: follower '{}' synced nothing for {} ms with sequence {} to sync; it is not in sync "
                   "until it has synced {}",
                   f.status.name, stall_limit_.count(), f.status.synced_sequence + 1, written_);
    }
  }

  const std::chrono::milliseconds stall_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_key_ = 0;
  uint64_t written_ = 0;
  struct Entry {
    FollowerStatus status;
    uint64_t in_sync_from = 0;  // in sync once it has synced this far
    Clock::time_point progress;  // when it joined or last synced more
  };
  std::map<uint64_t, Entry> followers_;
};

// sinew.v1.StoreReplication: one stream per follower.
class ReplicationService final : public v1::StoreReplication::Service {
 public:
  ReplicationService(RocksStore* store, std::string dir, FollowerBook* book, ReplicationMode mode)
      : store_(store), dir_(std::move(dir)), book_(book), mode_(mode) {}

  grpc::Status Seed(grpc::ServerContext*, const v1::SeedRequest* req,
                    grpc::ServerWriter<v1::SeedChunk>* out) override {
    const std::string scratch = dir_ + ".seed-" + std::to_string(++seeds_);
    spdlog::info("replication: seeding follower '{}' from a checkpoint", req->follower());
    Status served = ServeSeed(store_, scratch, out);
    if (!served.ok()) spdlog::warn("replication: seeding follower '{}': {}", req->follower(), served.ToString());
    return ToGrpcStatus(served);
  }

  grpc::Status GetReplicationStatus(grpc::ServerContext*, const v1::GetReplicationStatusRequest*,
                                    v1::ReplicationStatus* out) override {
    out->set_mode(mode_ == ReplicationMode::kSync ? "sync" : "async");
    out->set_latest_sequence(store_->LatestSequence());
    for (const auto& f : book_->List()) {
      auto* p = out->add_followers();
      p->set_name(f.name);
      p->set_synced_sequence(f.synced_sequence);
      p->set_in_sync(f.in_sync);
    }
    return grpc::Status::OK;
  }

  grpc::Status Replicate(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::ReplicatedBatch, v1::ReplicationAck>* stream) override {
    v1::ReplicationAck first;
    if (!stream->Read(&first) || !first.has_start()) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "a replication stream starts with `start`"};
    }
    const std::string name = first.start().follower();
    uint64_t next = first.start().from_sequence();
    if (next == 0) return {grpc::StatusCode::INVALID_ARGUMENT, "start.from_sequence must be at least 1"};
    // Read before the first batch is: a follower that knows this number (it asked for
    // the status before it started) is in sync no later than the book says.
    const uint64_t key = book_->Add(name, next - 1, store_->LatestSequence());
    spdlog::info("replication: follower '{}' streams from sequence {}", name, next);
    std::atomic<bool> reader_done{false};
    std::thread reader([&] {
      v1::ReplicationAck ack;
      while (stream->Read(&ack)) {
        if (ack.has_synced_sequence()) book_->Synced(key, ack.synced_sequence());
      }
      reader_done = true;
      book_->Wake();  // the writer below looks again
    });
    Status ended = Status::Ok();
    v1::ReplicatedBatch batch;
    RocksStore::LogTail tail;  // where this stream's log reading stopped
    // Each round's batches go out one behind the log reading, so that all but the round's
    // last say `more` and the follower syncs once per round (or per kSyncEvery batches of
    // a long one, so that a catch-up does not hold every acknowledgement to its end).
    constexpr int kSyncEvery = 64;
    bool held = false;
    int unsynced = 0;  // batches sent with `more` since the last without
    auto send_held = [&](bool more) {
      if (!held) return true;
      held = false;
      more = more && unsynced + 1 < kSyncEvery;
      unsynced = more ? unsynced + 1 : 0;
      batch.set_more(more);
      return stream->Write(batch);
    };
    while (!ctx->IsCancelled() && !reader_done) {
      auto sent = store_->ReadUpdates(next, [&](uint64_t sequence, uint32_t count, std::string_view data) {
        if (!send_held(/*more=*/true)) return false;
        batch.set_sequence(sequence);
        batch.set_count(count);
        batch.set_data(data.data(), data.size());
        held = true;
        return true;
      }, &tail);
      if (!send_held(/*more=*/false)) break;
      if (!sent.ok()) {
        ended = sent.status();
        if (ended.code() == StatusCode::kOutOfRange) {
          // Said in the stream: a status would be lost to the cancel that ends the reader.
          v1::ReplicatedBatch seed;
          seed.set_seed_needed(ended.message());
          stream->Write(seed);
        }
        break;
      }
      if (*sent == next) book_->AwaitWritten(next, std::chrono::milliseconds(200));
      next = *sent;
    }
    ctx->TryCancel();  // ends the reader's Read
    reader.join();
    book_->Remove(key);
    spdlog::info("replication: follower '{}' left at sequence {}{}", name, next - 1,
                 ended.ok() ? "" : ": " + ended.ToString());
    return ToGrpcStatus(ended);
  }

 private:
  RocksStore* store_;
  const std::string dir_;  // the store's directory: seeds are checkpointed beside it
  std::atomic<uint64_t> seeds_{0};
  FollowerBook* book_;
  const ReplicationMode mode_;
};

// The SessionStore of a primary: every write waits for a follower as the mode says.
class PrimaryImpl final : public Primary, public SessionStore {
 public:
  PrimaryImpl(std::unique_ptr<RocksStore> store, const std::string& dir, const PrimaryOptions& options)
      : options_(options),
        book_(options.follower_timeout),
        store_(std::move(store)),
        service_(store_.get(), dir, &book_, options.mode) {
    book_.Written(store_->LatestSequence());
  }

  SessionStore* store() override { return this; }
  grpc::Service* service() override { return &service_; }
  uint64_t LatestSequence() override { return store_->LatestSequence(); }
  std::vector<FollowerStatus> Followers() override { return book_.List(); }
  bool Degraded() override { return degraded_.load(); }

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override {
    return Replicated(store_->CreateSession(req));
  }
  Result<v1::Session> GetSession(const std::string& id) override { return store_->GetSession(id); }
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override {
    return store_->ListSessions(req);
  }
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override {
    return Replicated(store_->SetStatus(req));
  }
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override {
    return Replicated(store_->Append(req));
  }
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return store_->GetEvents(req);
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    return store_->ReadEventBytes(req);
  }
  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& id, uint64_t from_seq) override {
    return store_->Watch(id, from_seq);
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override {
    return Replicated(store_->AcquireLease(id, holder, ttl));
  }
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override {
    auto renewed = store_->RenewLease(id, owner, epoch, ttl);
    book_.Written(store_->LatestSequence());  // streamed, not waited for
    return renewed;
  }
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override {
    Status released = store_->ReleaseLease(id, owner, epoch);
    if (!released.ok()) return released;
    return AwaitFollower();
  }
  Status Checkpoint(const std::string& target_dir) override { return store_->Checkpoint(target_dir); }
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override {
    return Replicated(store_->AppendAudit(req));
  }
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override {
    return store_->ListAudit(req);
  }

 private:
  // A write that succeeded is acknowledged once the mode allows (a refused one wrote nothing).
  template <typename T>
  Result<T> Replicated(Result<T> written) {
    if (!written.ok()) return written;
    SINEW_RETURN_IF_ERROR(AwaitFollower());
    return written;
  }

  // Runs after the store released its locks: only this write's caller waits.
  Status AwaitFollower() {
    // At least this caller's write: the log's end after it returned.
    const uint64_t sequence = store_->LatestSequence();
    book_.Written(sequence);  // the streams send it now, while the log syncs here
    SINEW_RETURN_IF_ERROR(store_->SyncLog(sequence));
    if (options_.mode == ReplicationMode::kAsync) return Status::Ok();
    if (AloneAndDegraded()) return Status::Ok();
    if (book_.AwaitSynced(sequence, options_.follower_timeout)) return Status::Ok();
    // The follower this write waited for may have been found stalled just now.
    if (AloneAndDegraded()) return Status::Ok();
    return Status::Unavailable("no follower synced sequence " + std::to_string(sequence) + " within " +
                               std::to_string(options_.follower_timeout.count()) +
                               " ms; the write is kept here: retry it with the same idempotency key");
  }
  // degrade_when_alone and no follower in sync: writes go unreplicated. Logs each change.
  bool AloneAndDegraded() {
    if (!options_.degrade_when_alone) return false;
    const bool alone = !book_.AnyInSync();
    if (alone != degraded_.exchange(alone)) {
      if (alone) {
        spdlog::warn("replication: no follower in sync; writes are acknowledged without one (degraded to async)");
      } else {
        spdlog::info("replication: a follower is in sync again; writes wait for it again (sync)");
      }
    }
    return alone;
  }

  const PrimaryOptions options_;
  std::atomic<bool> degraded_{false};  // degrade_when_alone: writes go unreplicated now
  FollowerBook book_;
  std::unique_ptr<RocksStore> store_;
  ReplicationService service_;
};

class FollowerImpl final : public Follower {
 public:
  FollowerImpl(std::unique_ptr<RocksStore> store, std::string dir, std::string primary, FollowerOptions options)
      : store_(std::move(store)), dir_(std::move(dir)), primary_(std::move(primary)), options_(std::move(options)) {
    applied_ = store_->LatestSequence();
    thread_ = std::thread([this] { Run(); });
  }
  ~FollowerImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      if (ctx_) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }

  uint64_t AppliedSequence() override { return applied_.load(); }
  Status LastError() override {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
  }

 private:
  void Run() {
    auto backoff = std::chrono::milliseconds(100);
    while (true) {
      Status ended = StreamOnce();
      if (ended.code() == StatusCode::kOutOfRange) {
        spdlog::info("follower '{}': {}; seeding from a checkpoint", options_.name, ended.ToString());
        ended = SeedOnce();
        if (ended.ok()) {
          backoff = std::chrono::milliseconds(100);
          continue;
        }
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (stopping_) return;
        if (!ended.ok() && ended.ToString() != last_error_.ToString()) {
          spdlog::warn("follower '{}': stream from {} ended: {}", options_.name, primary_, ended.ToString());
        }
        last_error_ = ended;
        cv_.wait_for(lock, backoff, [&] { return stopping_; });
        if (stopping_) return;
      }
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
  }

  // One stream: from the first batch this store lacks until the stream ends.
  Status StreamOnce() {
    SINEW_ASSIGN_OR_RETURN(auto channel, GrpcChannel(primary_, options_.tls, StoreChannelArgs()));
    auto stub = v1::StoreReplication::NewStub(channel);
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return Status::Ok();
      ctx_ = &ctx;
    }
    // The primary counts this follower in sync from its last sequence number now on, or
    // from a later one: caught up with this number, the follower is surely in sync.
    bool await_caught_up = false;
    uint64_t caught_up_at = 0;
    if (options_.on_caught_up) {
      grpc::ClientContext status_ctx;
      status_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::ReplicationStatus status;
      grpc::Status got = stub->GetReplicationStatus(&status_ctx, {}, &status);
      if (!got.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ctx_ = nullptr;
        return FromGrpcStatus(got);
      }
      caught_up_at = status.latest_sequence();
      await_caught_up = true;
    }
    auto caught_up = [&]() -> Status {
      if (!await_caught_up || applied_.load() < caught_up_at) return Status::Ok();
      await_caught_up = false;
      return options_.on_caught_up();
    };
    auto stream = stub->Replicate(&ctx);
    v1::ReplicationAck start;
    start.mutable_start()->set_follower(options_.name);
    start.mutable_start()->set_from_sequence(store_->LatestSequence() + 1);
    Status applied = caught_up();
    if (applied.ok() && stream->Write(start)) {
      v1::ReplicatedBatch batch;
      v1::ReplicationAck ack;
      while (stream->Read(&batch)) {
        if (!batch.seed_needed().empty()) {
          applied = Status::OutOfRange(batch.seed_needed());
          ctx.TryCancel();
          break;
        }
        // A batch with `more` is synced, and acknowledged, with a later one.
        applied = store_->ApplyReplicated(batch.sequence(), batch.count(), batch.data(),
                                          /*sync=*/!batch.more());
        if (!applied.ok()) {
          ctx.TryCancel();
          break;
        }
        if (batch.more()) continue;
        applied_ = batch.sequence() + batch.count() - 1;
        applied = caught_up();
        if (!applied.ok()) {
          ctx.TryCancel();
          break;
        }
        ack.set_synced_sequence(applied_.load());
        if (!stream->Write(ack)) break;
      }
    }
    stream->WritesDone();
    grpc::Status finished = stream->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
    }
    if (!applied.ok()) return applied;
    return FromGrpcStatus(finished);
  }

  // The primary no longer keeps the log this store needs: replaces the directory by a
  // checkpoint of the primary's (the store is closed meanwhile) and reopens it.
  Status SeedOnce() {
    SINEW_ASSIGN_OR_RETURN(auto channel, GrpcChannel(primary_, options_.tls, StoreChannelArgs()));
    auto stub = v1::StoreReplication::NewStub(channel);
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return Status::Ok();
      ctx_ = &ctx;
    }
    v1::SeedRequest req;
    req.set_follower(options_.name);
    auto reader = stub->Seed(&ctx, req);
    store_.reset();
    Result<uint64_t> seeded = ReceiveSeed(reader.get(), dir_, options_.keep_files);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
    }
    auto reopened = RocksStore::Open(dir_, StoreOptions{});
    if (!reopened.ok()) {
      // Nothing else can be done with a directory that does not open: stop here.
      spdlog::error("follower '{}': cannot reopen {}: {}", options_.name, dir_, reopened.status().ToString());
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      return reopened.status();
    }
    store_ = std::move(*reopened);
    if (!seeded.ok()) return seeded.status();
    applied_ = store_->LatestSequence();
    if (applied_.load() < *seeded) {
      return Status::Corruption("a seed said it holds sequence " + std::to_string(*seeded) + " but opened at " +
                                std::to_string(applied_.load()));
    }
    spdlog::info("follower '{}': seeded {} from a checkpoint of {} through sequence {}", options_.name, dir_, primary_,
                 applied_.load());
    return Status::Ok();
  }

  std::unique_ptr<RocksStore> store_;  // null only while a seed replaces the directory
  const std::string dir_;
  const std::string primary_;
  const FollowerOptions options_;
  std::atomic<uint64_t> applied_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                 // guarded by mu_
  grpc::ClientContext* ctx_ = nullptr;    // the stream in flight; guarded by mu_
  Status last_error_ = Status::Ok();      // guarded by mu_
  std::thread thread_;
};

// `dir` without trailing slashes: seeds are kept beside it, named after it.
std::string WithoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Checkpoints left beside `dir` by seeds a crash interrupted.
void RemoveSeedScratch(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path path(dir);
  const std::string prefix = path.filename().string() + ".seed-";
  std::error_code ec;
  const fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

Result<std::unique_ptr<Primary>> OpenPrimaryStore(const std::string& given_dir, const StoreOptions& options,
                                                  const PrimaryOptions& primary) {
  const std::string dir = WithoutTrailingSlash(given_dir);
  if (primary.wal_ttl.count() <= 0) return Status::InvalidArgument("wal_ttl must be positive");
  RemoveSeedScratch(dir);
  SINEW_ASSIGN_OR_RETURN(auto store, RocksStore::Open(dir, options, primary.wal_ttl));
  store->DeferLogSyncs();  // AwaitFollower syncs, while the followers get the batch
  return std::unique_ptr<Primary>(new PrimaryImpl(std::move(store), dir, primary));
}

Result<uint64_t> StoredSequence(const std::string& dir) {
  StoreOptions read_only;
  read_only.read_only = true;
  auto store = RocksStore::Open(dir, read_only);
  if (!store.ok() && store.status().code() == StatusCode::kNotFound) return uint64_t{0};
  if (!store.ok()) return store.status();
  return (*store)->LatestSequence();
}

Result<std::unique_ptr<Follower>> Follower::Start(const std::string& given_dir, const std::string& primary_address,
                                                  const FollowerOptions& options) {
  const std::string dir = WithoutTrailingSlash(given_dir);
  if (primary_address.empty()) return Status::InvalidArgument("the primary's address is required");
  // A seed that a crash interrupted is not a store: start over.
  std::error_code ec;
  std::filesystem::remove_all(dir + ".seeding", ec);
  SINEW_ASSIGN_OR_RETURN(auto store, RocksStore::Open(dir, StoreOptions{}));
  return std::unique_ptr<Follower>(new FollowerImpl(std::move(store), dir, primary_address, options));
}

}  // namespace sinew::store
