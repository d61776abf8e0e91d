// RocksStore: the read paths of the event log, decoded (GetEvents) and as stored bytes
// (ReadEventBytes). Both read under no lock: the span is fixed under the stripe mutex,
// and an acknowledged append's events are in RocksDB before next_seq moves past them.
#include <algorithm>

#include "event_util.h"
#include "keys.h"
#include "rocks_store.h"

namespace sinew::store {
namespace {

constexpr uint32_t kDefaultEventLimit = 1000;

}  // namespace

Result<RocksStore::EventSpan> RocksStore::SpanOf(const std::string& raw_id, const std::string& id,
                                                 uint64_t from_seq, uint64_t to_seq, uint32_t limit,
                                                 uint32_t default_limit) {
  if (limit > kMaxEventLimit) {
    return Status::InvalidArgument("limit must be at most " + std::to_string(kMaxEventLimit));
  }
  EventSpan span;
  {
    std::unique_lock<std::mutex> lock;
    SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw_id, &lock));
    span.next_seq = state->meta.next_seq();
  }
  span.from = std::max<uint64_t>(1, from_seq);
  if (to_seq != 0 && to_seq < span.from) {
    return Status::InvalidArgument("to_seq " + std::to_string(to_seq) + " is before from_seq " +
                                   std::to_string(span.from) + " (session " + id + ")");
  }
  span.to = to_seq == 0 ? span.next_seq - 1 : std::min(to_seq, span.next_seq - 1);
  if (limit == 0) limit = default_limit;
  if (span.from <= span.to) span.to = std::min<uint64_t>(span.to, span.from + limit - 1);
  return span;
}

template <typename Visit>
Status RocksStore::ScanEvents(const std::string& raw_id, const std::string& id,
                              const EventSpan& span, Visit&& visit) {
  const std::string upper = keys::EventKey(raw_id, span.to + 1);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, events_cf_));
  uint64_t expect = span.from;
  bool stop = false;
  for (it->Seek(keys::EventKey(raw_id, span.from)); it->Valid(); it->Next()) {
    const uint64_t seq = keys::SeqFromEventKey(it->key().ToStringView());
    if (seq != expect) {
      return Status::Corruption("session " + id + ": expected event " + std::to_string(expect) +
                                " but found " + std::to_string(seq));
    }
    SINEW_RETURN_IF_ERROR(visit(seq, it->value(), &stop));
    if (stop) return Status::Ok();
    ++expect;
  }
  SINEW_RETURN_IF_ERROR(FromRocks(it->status(), "reading events of " + id));
  if (expect != span.to + 1) {
    return Status::Corruption("session " + id + ": events " + std::to_string(expect) + ".." +
                              std::to_string(span.to) + " are missing from the log");
  }
  return Status::Ok();
}

Result<v1::GetEventsResponse> RocksStore::GetEvents(const v1::GetEventsRequest& req) {
  const std::string& id = req.session_id();
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(id));
  SINEW_ASSIGN_OR_RETURN(EventSpan span, SpanOf(raw, id, req.from_seq(), req.to_seq(), req.limit(),
                                                kDefaultEventLimit));
  v1::GetEventsResponse out;
  out.set_next_seq(span.next_seq);
  if (span.from > span.to) return out;
  out.mutable_events()->Reserve(static_cast<int>(span.to - span.from + 1));
  SINEW_RETURN_IF_ERROR(
      ScanEvents(raw, id, span, [&](uint64_t seq, const rocksdb::Slice& value, bool*) {
        v1::Event* ev = out.add_events();
        if (!ev->ParseFromArray(value.data(), static_cast<int>(value.size())) || ev->seq() != seq) {
          return Status::Corruption("session " + id + ": event " + std::to_string(seq) +
                                    " is undecodable");
        }
        return Status::Ok();
      }));
  return out;
}

Result<v1::ReadEventBytesResponse> RocksStore::ReadEventBytes(
    const v1::ReadEventBytesRequest& req) {
  const std::string& id = req.session_id();
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(id));
  if (req.max_bytes() > kMaxPageBytes) {
    return Status::InvalidArgument("max_bytes must be at most " + std::to_string(kMaxPageBytes));
  }
  const uint64_t max_bytes = req.max_bytes() == 0 ? kDefaultPageBytes : req.max_bytes();
  SINEW_ASSIGN_OR_RETURN(
      EventSpan span, SpanOf(raw, id, req.from_seq(), req.to_seq(), req.limit(), kMaxEventLimit));
  v1::ReadEventBytesResponse out;
  out.set_next_seq(span.next_seq);
  if (span.from > span.to) return out;
  out.set_first_seq(span.from);
  uint64_t bytes = 0;
  SINEW_RETURN_IF_ERROR(
      ScanEvents(raw, id, span, [&](uint64_t seq, const rocksdb::Slice& value, bool* stop) {
        if (out.events_size() > 0 && bytes + value.size() > max_bytes) {
          *stop = true;  // the page is full; this event starts the next one
          return Status::Ok();
        }
        uint64_t stored_seq = 0;
        if (!ReadEnvelopeSeq(value.ToStringView(), &stored_seq)) {
          return Status::Corruption("session " + id + ": event " + std::to_string(seq) +
                                    " is undecodable (malformed envelope)");
        }
        if (stored_seq != seq) {
          return Status::Corruption("session " + id + ": event " + std::to_string(seq) +
                                    " carries seq " + std::to_string(stored_seq));
        }
        bytes += value.size();
        out.add_events()->assign(value.data(), value.size());
        return Status::Ok();
      }));
  return out;
}

}  // namespace sinew::store
