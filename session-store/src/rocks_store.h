// RocksStore: the embedded SessionStore over one RocksDB directory (see keys.h for layout).
//
// Concurrency: appends, leases and status changes of one session are serialised by one of
// kStripes mutexes chosen by the session id; different sessions write concurrently, so
// RocksDB's group commit merges their WAL syncs. The in-memory SessionState cache is
// authoritative because RocksDB's directory lock makes this process the only writer.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/transaction_log.h>

#include <array>
#include <condition_variable>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sinew/session_store/session_store.h"

namespace sinew::store {

class RocksStore final : public SessionStore {
 public:
  // keep_wal > 0 keeps write-ahead log files that long for ReadUpdates (a primary).
  static Result<std::unique_ptr<RocksStore>> Open(const std::string& dir,
                                                  const StoreOptions& options,
                                                  std::chrono::seconds keep_wal = std::chrono::seconds(0));
  ~RocksStore() override;

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override;
  Result<v1::Session> GetSession(const std::string& session_id) override;
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override;
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override;
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override;
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override;
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override;
  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& session_id,
                                              uint64_t from_seq) override;
  Result<v1::Lease> AcquireLease(const std::string& session_id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override;
  Result<v1::Lease> RenewLease(const std::string& session_id, const std::string& owner,
                               uint64_t epoch, std::chrono::milliseconds ttl) override;
  Status ReleaseLease(const std::string& session_id, const std::string& owner,
                      uint64_t epoch) override;
  Status Checkpoint(const std::string& target_dir) override;
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override;
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override;

  // Per-session state, guarded by the session's stripe mutex.
  struct SessionState {
    bool loaded = false;
    bool exists = false;
    v1::Session meta;
    v1::Lease lease;  // epoch 0: never leased; expires_unix_ms 0: released
    std::condition_variable cv;  // notified after every append
    // Watchers waiting without a thread (EventWatcher::OnReady), by watcher: called and
    // cleared after every append.
    std::unordered_map<const void*, std::function<void()>> ready;
    // cv.notify_all() and every `ready` callback.
    void NotifyLocked() {
      cv.notify_all();
      for (auto& [watcher, fn] : ready) fn();
      ready.clear();
    }
  };

  // Replication (replication_log.cc). The last RocksDB sequence number written.
  uint64_t LatestSequence() const;
  // Calls send(sequence, count, batch bytes) for each committed batch from sequence
  // `from` on, in order, while it returns true; returns the sequence number after the last
  // batch sent. kOutOfRange when the log from `from` is no longer kept (seed from a
  // checkpoint instead). With `tail` (one per stream, kept between calls), a call that starts where the last
  // one ended reads on with the same log iterator instead of opening the log again, which
  // reads the live log file from its start.
  using BatchSink = std::function<bool(uint64_t sequence, uint32_t count, std::string_view data)>;
  struct LogTail {
    std::unique_ptr<rocksdb::TransactionLogIterator> it;  // past its last batch; null: none
    uint64_t next = 0;                                    // the sequence number after that batch
  };
  Result<uint64_t> ReadUpdates(uint64_t from, const BatchSink& send, LogTail* tail = nullptr);
  // A checkpoint of this store in `target_dir` (which must not exist) for seeding a
  // follower; returns a sequence number the checkpoint holds everything up to.
  Result<uint64_t> CheckpointForSeed(const std::string& target_dir);
  // Applies a primary's batch, and with `sync` syncs the log up to it (the batches applied
  // before it without `sync` included). It must start right after LatestSequence() and
  // take `count` sequence numbers (kFailedPrecondition / kCorruption otherwise).
  // Only for a follower's store, which nothing else writes.
  Status ApplyReplicated(uint64_t sequence, uint32_t count, const std::string& data, bool sync);
  // A primary's store: writes return once in the log, before its fsync, so that they
  // reach followers while the log syncs here; SyncLog is then what makes a write durable
  // (in Durability::kSync; without it there is nothing to sync). Call before any write.
  void DeferLogSyncs();
  // Syncs the log up to at least `sequence`: one fsync for every caller that waits
  // meanwhile (group commit). Ok at once when syncs are not deferred.
  Status SyncLog(uint64_t sequence);

  // For EventWatcher: the stripe mutex and state of a session (loaded, existing).
  Result<std::shared_ptr<SessionState>> LoadedState(const std::string& raw_id,
                                                    std::unique_lock<std::mutex>* lock);
  std::mutex& StripeFor(const std::string& raw_id);

 private:
  static constexpr size_t kStripes = 256;

  RocksStore(StoreOptions options, std::unique_ptr<rocksdb::DB> db,
             std::vector<rocksdb::ColumnFamilyHandle*> handles);

  std::shared_ptr<SessionState> StateFor(const std::string& raw_id);
  // The events [from, to] a read of [from_seq, to_seq] with `limit` covers (from > to:
  // none) and the session's next_seq, taken under the stripe mutex, so every append
  // acknowledged before the call lies inside [1, next_seq). Errors as GetEvents.
  struct EventSpan {
    uint64_t from = 1;
    uint64_t to = 0;
    uint64_t next_seq = 0;
  };
  // `limit` 0 means `default_limit`.
  Result<EventSpan> SpanOf(const std::string& raw_id, const std::string& id, uint64_t from_seq,
                           uint64_t to_seq, uint32_t limit, uint32_t default_limit);
  // Calls visit(seq, value, &stop) for the stored events span.from..span.to in order,
  // until one sets stop (that event is not taken). kCorruption when an event is missing.
  template <typename Visit>
  Status ScanEvents(const std::string& raw_id, const std::string& id, const EventSpan& span,
                    Visit&& visit);
  Status LoadLocked(const std::string& raw_id, SessionState* state);
  // Sets meta->next_seq and updated time from the session's last event: plain appends
  // do not rewrite the metadata record, so the log says where it ends.
  Status LoadLogEnd(const std::string& raw_id, v1::Session* meta);
  Status CheckWritable() const;
  // Validates, assigns sequence numbers and writes `events`. expected_next_seq 0 skips the
  // sequence check (internal status changes). REQUIRES: the stripe mutex is held.
  Result<v1::AppendResponse> AppendLocked(const std::string& raw_id, SessionState* state,
                                          std::vector<v1::Event> events,
                                          uint64_t expected_next_seq, uint64_t lease_epoch,
                                          const std::string& idempotency_key);
  Status CheckFence(const SessionState& state, uint64_t lease_epoch, int64_t now_ms) const;
  // Writes `lease` (and, with bump_meta_epoch, its epoch into the metadata). sync=false
  // skips the fsync even in sync durability: only for a renewal, whose loss in a machine
  // crash shortens a lease and never grants one.
  Result<v1::Lease> WriteLease(const std::string& raw_id, SessionState* state, v1::Lease lease,
                               bool bump_meta_epoch, bool sync = true);

  // Constant after construction.
  const StoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* events_cf_;
  rocksdb::ColumnFamilyHandle* sessions_cf_;
  rocksdb::ColumnFamilyHandle* leases_cf_;
  rocksdb::ColumnFamilyHandle* index_cf_;
  rocksdb::ColumnFamilyHandle* idempotency_cf_;
  rocksdb::WriteOptions write_options_;
  bool defer_syncs_ = false;  // set by DeferLogSyncs before any write

  // SyncLog's group: one caller syncs, the others wait for it.
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool syncing_ = false;  // GUARDED_BY(sync_mu_)
  uint64_t synced_ = 0;   // GUARDED_BY(sync_mu_): the log is synced up to here

  // Audit records are written one at a time, each with an id above the last one's, so
  // that a reader paging through a tenant's log never finds one appear behind its place.
  std::mutex audit_mu_;  // serialises AppendAudit: each record's id follows its tenant's last

  std::array<std::mutex, kStripes> stripes_;
  std::mutex cache_mu_;
  std::unordered_map<std::string, std::shared_ptr<SessionState>> cache_;  // GUARDED_BY(cache_mu_)
};

// Translates a RocksDB status into a Sinew one, with `what` as context.
Status FromRocks(const rocksdb::Status& s, const std::string& what);
int64_t NowUnixMs();

}  // namespace sinew::store
