// RocksStore: the tenant audit log (keys.h: 'U' keys of the default column family).
#include "keys.h"
#include "rocks_store.h"

namespace sinew::store {
namespace {

constexpr size_t kMaxAuditRecordBytes = 16 * 1024;
constexpr uint32_t kDefaultAuditPage = 50;
constexpr uint32_t kMaxAuditPage = 1000;
constexpr size_t kAuditIdBytes = 16;

// The raw id after `last`: the later of now and last's millisecond, with a counter one
// above last's within that millisecond (0 in a new one).
std::string NextAuditRaw(const std::string& last, int64_t now_ms) {
  uint64_t ms = static_cast<uint64_t>(now_ms);
  uint64_t counter = 0;
  if (last.size() == kAuditIdBytes) {
    const uint64_t last_ms = keys::ReadBigEndian64(std::string_view(last).substr(0, 8));
    if (last_ms >= ms) {
      ms = last_ms;
      counter = keys::ReadBigEndian64(std::string_view(last).substr(8)) + 1;
    }
  }
  std::string raw;
  keys::AppendBigEndian64(&raw, ms);
  keys::AppendBigEndian64(&raw, counter);
  return raw;
}

}  // namespace

Result<v1::AuditRecord> RocksStore::AppendAudit(const v1::AppendAuditRequest& req) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_RETURN_IF_ERROR(keys::ParseSessionId(req.session_id()).status());
  if (req.audit().tenant().empty()) return Status::InvalidArgument("audit.tenant is required");
  if (req.audit().tenant().find('\0') != std::string::npos) {
    return Status::InvalidArgument("audit.tenant must not contain NUL");
  }
  if (req.audit().action().empty()) return Status::InvalidArgument("audit.action is required");
  v1::AuditRecord record;
  record.set_session_id(req.session_id());
  *record.mutable_audit() = req.audit();
  if (record.ByteSizeLong() + 64 > kMaxAuditRecordBytes) {
    return Status::InvalidArgument("audit record is over " + std::to_string(kMaxAuditRecordBytes) + " bytes");
  }
  const std::string prefix = keys::AuditPrefix(req.audit().tenant());
  std::lock_guard<std::mutex> lock(audit_mu_);
  // The tenant's newest record (ids rise within a tenant's log, across restarts too): one
  // seek to the last key under its prefix, which ends in '\0', so every key of it sorts
  // below the prefix with '\1' in that place.
  std::string last;
  {
    std::string upper = prefix;
    upper.back() = '\1';
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[0]));
    it->SeekForPrev(upper);
    if (it->Valid() && it->key().starts_with(prefix) && it->key().size() == prefix.size() + kAuditIdBytes) {
      last.assign(it->key().data() + prefix.size(), kAuditIdBytes);
    }
    SINEW_RETURN_IF_ERROR(FromRocks(it->status(), "reading the audit log"));
  }
  const int64_t now = NowUnixMs();
  const std::string raw = NextAuditRaw(last, now);
  record.set_id(keys::ToHex(raw));
  record.set_recorded_unix_ms(now);
  SINEW_RETURN_IF_ERROR(FromRocks(db_->Put(write_options_, handles_[0], keys::AuditKey(req.audit().tenant(), raw),
                                           record.SerializeAsString()),
                                  "writing an audit record"));
  return record;
}

Result<v1::ListAuditResponse> RocksStore::ListAudit(const v1::ListAuditRequest& req) {
  if (req.tenant().empty()) return Status::InvalidArgument("tenant is required");
  if (req.page_size() > kMaxAuditPage) {
    return Status::InvalidArgument("page_size must be at most " + std::to_string(kMaxAuditPage));
  }
  const uint32_t page_size = req.page_size() == 0 ? kDefaultAuditPage : req.page_size();
  const std::string prefix = keys::AuditPrefix(req.tenant());
  std::string start = prefix;
  std::string after;
  if (!req.page_token().empty()) {
    auto raw = keys::FromHex(req.page_token());
    if (!raw.ok() || raw->size() != kAuditIdBytes) {
      return Status::InvalidArgument("page_token is not an audit record id (32 hex digits); repeat the request without it");
    }
    after = *raw;
    start += after;
  }
  v1::ListAuditResponse out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[0]));
  for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != prefix.size() + kAuditIdBytes) continue;
    if (!after.empty() && it->key().ToStringView().substr(prefix.size()) == after) continue;
    if (out.records_size() == static_cast<int>(page_size)) {
      out.set_next_page_token(out.records(out.records_size() - 1).id());
      break;
    }
    if (!out.add_records()->ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Status::Corruption("audit record " + keys::ToHex(it->key().ToStringView().substr(prefix.size())) +
                                " of tenant " + req.tenant() + " does not decode");
    }
  }
  SINEW_RETURN_IF_ERROR(FromRocks(it->status(), "listing the audit log"));
  return out;
}

}  // namespace sinew::store
