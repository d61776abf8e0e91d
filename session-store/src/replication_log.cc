// RocksStore: its write-ahead log read and replayed as batches (a shard's replication).
#include <algorithm>

#include <rocksdb/transaction_log.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "rocks_store.h"

namespace sinew::store {
namespace {

// A WriteBatch's fixed header: an 8-byte sequence number and a 4-byte count.
constexpr size_t kBatchHeaderBytes = 12;

}  // namespace

uint64_t RocksStore::LatestSequence() const { return db_->GetLatestSequenceNumber(); }

Result<uint64_t> RocksStore::ReadUpdates(uint64_t from, const BatchSink& send, LogTail* tail) {
  if (from == 0) return Status::InvalidArgument("replication starts at sequence 1 or later");
  if (from > db_->GetLatestSequenceNumber()) return from;  // nothing new
  LogTail local;
  LogTail& t = tail != nullptr ? *tail : local;
  // An iterator that stopped at the end of the log reads what was written since on its
  // next Next() (RocksDB reads on in the same file); when it cannot (a new log file, an
  // error), the log is opened again at `from`.
  bool resumed = false;
  if (t.it && t.next == from && t.it->status().ok()) {
    t.it->Next();
    resumed = t.it->Valid() && t.it->status().ok();  // on the batch at `from`: checked below
  }
  if (!resumed) {
    t.it.reset();
    rocksdb::Status s = db_->GetUpdatesSince(from, &t.it);
    if (!s.ok()) {
      t.it.reset();
      return Status::OutOfRange("this store no longer keeps its log from sequence " +
                                        std::to_string(from) + " (" + s.ToString() +
                                        "): seed the follower from a checkpoint");
    }
  }
  rocksdb::TransactionLogIterator* it = t.it.get();
  uint64_t next = from;
  for (; it->Valid(); it->Next()) {
    rocksdb::BatchResult b = it->GetBatch();
    const uint32_t count = b.writeBatchPtr->Count();
    if (b.sequence + count <= next) continue;  // the first batch may end before `from`
    if (b.sequence != next) {
      t.it.reset();
      return Status::OutOfRange("the log here has no batch starting at sequence " +
                                        std::to_string(next) + " (the next starts at " +
                                        std::to_string(b.sequence) +
                                        "): seed the follower from a checkpoint");
    }
    const std::string& data = b.writeBatchPtr->Data();
    if (!send(b.sequence, count, std::string_view(data))) {
      t.it.reset();  // it stands on a batch not sent
      return next;
    }
    next = b.sequence + count;
  }
  // The iterator stops at the end of what is written (its status may then say so); only
  // damage is an error.
  if (it->status().IsCorruption()) {
    Status damaged = FromRocks(it->status(), "reading the write-ahead log");
    t.it.reset();
    return damaged;
  }
  t.next = next;
  return next;
}

void RocksStore::DeferLogSyncs() {
  defer_syncs_ = write_options_.sync;
  write_options_.sync = false;
}

Status RocksStore::SyncLog(uint64_t sequence) {
  if (!defer_syncs_) return Status::Ok();
  std::unique_lock<std::mutex> lock(sync_mu_);
  while (synced_ < sequence) {
    if (syncing_) {
      sync_cv_.wait(lock);
      continue;
    }
    syncing_ = true;
    // Every write up to here is in the log file: RocksDB publishes a sequence number after
    // its batch is written to the log.
    const uint64_t target = db_->GetLatestSequenceNumber();
    lock.unlock();
    const rocksdb::Status s = db_->SyncWAL();
    lock.lock();
    syncing_ = false;
    sync_cv_.notify_all();
    if (!s.ok()) return FromRocks(s, "syncing the write-ahead log");
    synced_ = std::max(synced_, target);
  }
  return Status::Ok();
}

Result<uint64_t> RocksStore::CheckpointForSeed(const std::string& target_dir) {
  rocksdb::Checkpoint* raw = nullptr;
  SINEW_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  uint64_t sequence = 0;
  SINEW_RETURN_IF_ERROR(FromRocks(checkpoint->CreateCheckpoint(target_dir, 0, &sequence),
                                  "checkpoint to " + target_dir));
  return sequence;
}

Status RocksStore::ApplyReplicated(uint64_t sequence, uint32_t count, const std::string& data,
                                   bool sync) {
  if (data.size() < kBatchHeaderBytes) {
    return Status::Corruption("a replicated batch of " + std::to_string(data.size()) +
                              " bytes is shorter than a batch header");
  }
  const uint64_t latest = db_->GetLatestSequenceNumber();
  if (sequence != latest + 1) {
    return Status::FailedPrecondition("a replicated batch starts at sequence " +
                                      std::to_string(sequence) + " but this store ends at " +
                                      std::to_string(latest));
  }
  rocksdb::WriteBatch batch(data);
  if (batch.Count() != count || count == 0) {
    return Status::Corruption("a replicated batch's header says it holds " + std::to_string(batch.Count()) +
                              " writes, the primary sent " + std::to_string(count));
  }
  rocksdb::WriteOptions options;
  options.sync = sync;  // a sync write syncs the log files before it too
  SINEW_RETURN_IF_ERROR(FromRocks(db_->Write(options, &batch), "applying a replicated batch"));
  if (db_->GetLatestSequenceNumber() != sequence + count - 1) {
    return Status::Internal("a replicated batch at sequence " + std::to_string(sequence) +
                            " ended at " + std::to_string(db_->GetLatestSequenceNumber()) +
                            " here (was this store written by another?)");
  }
  return Status::Ok();
}

}  // namespace sinew::store
