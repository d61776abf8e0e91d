// RocksStore: appends, status changes and leases (the fenced write paths).
#include <rocksdb/write_batch.h>

#include "event_util.h"
#include "keys.h"
#include "rocks_store.h"

namespace sinew::store {
namespace {

// A URL is short; this bounds what a caller can make the store keep per session.
constexpr size_t kMaxLeaseUrlBytes = 2048;

bool LeaseLive(const v1::Lease& lease, int64_t now_ms) {
  return lease.epoch() != 0 && lease.expires_unix_ms() > now_ms;
}

// Whether `owner` still holds `epoch`: granted to it and neither released nor taken by
// another since. Expiry alone does not end a holding: it only lets another acquire.
bool LeaseHeldBy(const v1::Lease& lease, const std::string& owner, uint64_t epoch) {
  return epoch != 0 && lease.epoch() == epoch && lease.owner() == owner && lease.expires_unix_ms() != 0;
}

}  // namespace

Status RocksStore::CheckFence(const SessionState& state, uint64_t lease_epoch,
                              int64_t now_ms) const {
  const v1::Lease& lease = state.lease;
  if (LeaseLive(lease, now_ms)) {
    if (lease_epoch != lease.epoch()) {
      return Status::Aborted("fenced out: session " + state.meta.id() + " is leased to '" +
                             lease.owner() + "' at epoch " + std::to_string(lease.epoch()) +
                             ", append carried epoch " + std::to_string(lease_epoch));
    }
    return Status::Ok();
  }
  // Expired but not taken: its holder may still write (nobody else can have started).
  if (lease_epoch != 0 && (lease_epoch != lease.epoch() || lease.expires_unix_ms() == 0)) {
    return Status::Aborted("fenced out: lease epoch " + std::to_string(lease_epoch) +
                           " of session " + state.meta.id() +
                           " was released or taken by another; acquire the lease again");
  }
  return Status::Ok();
}

Result<v1::AppendResponse> RocksStore::Append(const v1::AppendRequest& req) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(req.session_id()));
  if (req.events_size() == 0) return Status::InvalidArgument("append carries no events");
  if (static_cast<size_t>(req.events_size()) > options_.max_events_per_append) {
    return Status::InvalidArgument("append carries " + std::to_string(req.events_size()) +
                                   " events; the limit is " +
                                   std::to_string(options_.max_events_per_append));
  }
  if (req.expected_next_seq() == 0) {
    return Status::InvalidArgument("expected_next_seq is required (the session's next_seq)");
  }
  if (req.idempotency_key().size() > 256) {
    return Status::InvalidArgument("idempotency_key is over 256 bytes");
  }
  std::vector<v1::Event> events(req.events().begin(), req.events().end());
  for (size_t i = 0; i < events.size(); ++i) {
    SINEW_RETURN_IF_ERROR(ValidateEventForAppend(events[i], i, options_.max_event_bytes));
    if (!events[i].session_id().empty() && events[i].session_id() != req.session_id()) {
      return Status::InvalidArgument("event " + std::to_string(i) + " names session " +
                                     events[i].session_id() + ", not " + req.session_id());
    }
    if (events[i].seq() != 0 && events[i].seq() != req.expected_next_seq() + i) {
      return Status::InvalidArgument("event " + std::to_string(i) + " carries seq " +
                                     std::to_string(events[i].seq()) + " but would be stored as " +
                                     std::to_string(req.expected_next_seq() + i));
    }
  }
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  return AppendLocked(raw, state.get(), std::move(events), req.expected_next_seq(),
                      req.lease_epoch(), req.idempotency_key());
}

Result<v1::AppendResponse> RocksStore::AppendLocked(const std::string& raw_id, SessionState* state,
                                                    std::vector<v1::Event> events,
                                                    uint64_t expected_next_seq,
                                                    uint64_t lease_epoch,
                                                    const std::string& idempotency_key) {
  if (!idempotency_key.empty()) {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), idempotency_cf_,
                                 keys::IdempotencyKey(raw_id, idempotency_key), &value);
    if (s.ok()) {
      v1::AppendResponse first;
      if (!first.ParseFromString(value)) {
        return Status::Corruption("idempotency record '" + idempotency_key + "' is undecodable");
      }
      first.set_deduplicated(true);
      return first;
    }
    if (!s.IsNotFound()) return FromRocks(s, "reading idempotency key");
  }
  const int64_t now = NowUnixMs();
  SINEW_RETURN_IF_ERROR(CheckFence(*state, lease_epoch, now));
  const uint64_t next = state->meta.next_seq();
  if (expected_next_seq != 0 && expected_next_seq != next) {
    return Status::FailedPrecondition("session " + state->meta.id() + " expected_next_seq " +
                                      std::to_string(expected_next_seq) + " but the next is " +
                                      std::to_string(next) + "; re-read the log and retry");
  }

  const std::string& id = state->meta.id();
  rocksdb::WriteBatch batch;
  uint64_t seq = next;
  std::string buf;
  v1::SessionStatus status = state->meta.status();
  bool status_changed = false;
  for (auto& ev : events) {
    ev.set_session_id(id);
    ev.set_seq(seq);
    if (ev.timestamp_unix_ms() == 0) ev.set_timestamp_unix_ms(now);
    ev.set_type(EventTypeName(ev));
    if (ev.has_status_change()) {
      status = ev.status_change().to();
      status_changed = true;
    }
    buf.clear();
    ev.SerializeToString(&buf);
    batch.Put(events_cf_, keys::EventKey(raw_id, seq), buf);
    ++seq;
  }
  // The metadata record is rewritten only when the status changes (in the same batch as
  // the event that changes it); next_seq and updated time are read back from the log.
  if (status_changed) {
    v1::Session meta = state->meta;
    meta.set_status(status);
    meta.set_next_seq(seq);
    meta.set_updated_unix_ms(now);
    batch.Put(sessions_cf_, raw_id, meta.SerializeAsString());
  }

  v1::AppendResponse out;
  out.set_first_seq(next);
  out.set_last_seq(seq - 1);
  if (!idempotency_key.empty()) {
    batch.Put(idempotency_cf_, keys::IdempotencyKey(raw_id, idempotency_key),
              out.SerializeAsString());
  }
  SINEW_RETURN_IF_ERROR(FromRocks(db_->Write(write_options_, &batch), "appending to " + id));
  state->meta.set_status(status);
  state->meta.set_next_seq(seq);
  state->meta.set_updated_unix_ms(now);
  state->NotifyLocked();
  return out;
}

Result<v1::Session> RocksStore::SetStatus(const v1::SetStatusRequest& req) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(req.session_id()));
  SINEW_RETURN_IF_ERROR(ValidateStatus(req.status(), "status"));
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  std::vector<v1::Event> events(1);
  auto* change = events[0].mutable_status_change();
  change->set_from(state->meta.status());
  change->set_to(req.status());
  change->set_reason(req.reason());
  SINEW_RETURN_IF_ERROR(
      AppendLocked(raw, state.get(), std::move(events), 0, req.lease_epoch(), "").status());
  return state->meta;
}

Result<v1::Lease> RocksStore::WriteLease(const std::string& raw_id, SessionState* state,
                                         v1::Lease lease, bool bump_meta_epoch, bool sync) {
  rocksdb::WriteBatch batch;
  batch.Put(leases_cf_, raw_id, lease.SerializeAsString());
  v1::Session meta = state->meta;
  if (bump_meta_epoch) {
    meta.set_lease_epoch(lease.epoch());
    batch.Put(sessions_cf_, raw_id, meta.SerializeAsString());
  }
  rocksdb::WriteOptions options = write_options_;
  options.sync = options.sync && sync;
  SINEW_RETURN_IF_ERROR(FromRocks(db_->Write(options, &batch), "writing lease of " + meta.id()));
  state->meta = std::move(meta);
  state->lease = lease;
  state->NotifyLocked();
  return lease;
}

Result<v1::Lease> RocksStore::AcquireLease(const std::string& session_id, const LeaseHolder& holder,
                                           std::chrono::milliseconds ttl) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  const std::string& owner = holder.owner;
  SINEW_RETURN_IF_ERROR(ValidateLeaseArgs(owner, ttl));
  if (holder.url.size() > kMaxLeaseUrlBytes) {
    return Status::InvalidArgument("lease holder_url is longer than " +
                                   std::to_string(kMaxLeaseUrlBytes) + " bytes");
  }
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  const int64_t now = NowUnixMs();
  v1::Lease lease = state->lease;
  if (LeaseLive(lease, now)) {
    if (lease.owner() != owner) {
      return Status::FailedPrecondition("session " + session_id + " is leased to '" +
                                        lease.owner() + "' for another " +
                                        std::to_string(lease.expires_unix_ms() - now) + " ms");
    }
    lease.set_expires_unix_ms(now + ttl.count());
    lease.set_holder_url(holder.url);
    return WriteLease(raw, state.get(), lease, false);
  }
  lease.set_session_id(session_id);
  lease.set_owner(owner);
  lease.set_holder_url(holder.url);
  lease.set_epoch(state->meta.lease_epoch() + 1);
  lease.set_expires_unix_ms(now + ttl.count());
  return WriteLease(raw, state.get(), lease, true);
}

Result<v1::Lease> RocksStore::RenewLease(const std::string& session_id, const std::string& owner,
                                         uint64_t epoch, std::chrono::milliseconds ttl) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  SINEW_RETURN_IF_ERROR(ValidateLeaseArgs(owner, ttl));
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  const int64_t now = NowUnixMs();
  v1::Lease lease = state->lease;
  // A late renewal (the holder was slow, the store was busy) keeps a lease nobody took
  // in the meantime: a holder is replaced only by another's acquire, never by its own lag.
  if (!LeaseHeldBy(lease, owner, epoch)) {
    return Status::Aborted("lease epoch " + std::to_string(epoch) + " of session " + session_id +
                           " is no longer held by '" + owner + "'; acquire it again");
  }
  lease.set_expires_unix_ms(now + ttl.count());
  return WriteLease(raw, state.get(), lease, false, /*sync=*/false);
}

Status RocksStore::ReleaseLease(const std::string& session_id, const std::string& owner,
                                uint64_t epoch) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  if (owner.empty()) return Status::InvalidArgument("lease owner is required");
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  v1::Lease lease = state->lease;
  if (lease.epoch() != epoch || lease.owner() != owner) {
    return Status::Aborted("lease epoch " + std::to_string(epoch) + " of session " + session_id +
                           " is not held by '" + owner + "'");
  }
  if (lease.expires_unix_ms() == 0) return Status::Ok();  // already released
  lease.set_expires_unix_ms(0);
  return WriteLease(raw, state.get(), lease, false).status();
}

}  // namespace sinew::store
