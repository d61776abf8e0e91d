#include "rocks_store.h"

#include <rocksdb/utilities/checkpoint.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "event_util.h"
#include "keys.h"

namespace sinew::store {
namespace {

const std::vector<std::string> kFamilies(std::begin(keys::kColumnFamilies),
                                         std::end(keys::kColumnFamilies));
constexpr uint32_t kMaxListScan = 10000;

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  std::string m = what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsNotFound()) return Status::NotFound(m);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(m);
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return Status::Unavailable(m);
  if (s.IsNoSpace()) return Status::ResourceExhausted(m);
  if (s.IsIOError()) {
    if (s.ToString().find("lock") != std::string::npos) {
      return Status::Unavailable(m + " (is another sinew-store process using this directory?)");
    }
    return Status::IOError(m);
  }
  return Status::Internal(m);
}

Result<std::unique_ptr<SessionStore>> OpenSessionStore(const std::string& dir,
                                                       const StoreOptions& options) {
  SINEW_ASSIGN_OR_RETURN(auto store, RocksStore::Open(dir, options));
  return std::unique_ptr<SessionStore>(std::move(store));
}

Result<std::unique_ptr<RocksStore>> RocksStore::Open(const std::string& dir,
                                                     const StoreOptions& options,
                                                     std::chrono::seconds keep_wal) {
  if (dir.empty()) return Status::InvalidArgument("store directory is empty");
  rocksdb::DBOptions db_options;
  db_options.paranoid_checks = true;
  // A torn last record (a write the crash interrupted, never acknowledged) is dropped;
  // damage anywhere else fails the open instead of silently truncating the log.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.max_background_jobs = 2;
  db_options.enable_pipelined_write = false;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  if (keep_wal.count() > 0) {
    db_options.WAL_ttl_seconds = static_cast<uint64_t>(keep_wal.count());
  }

  std::vector<std::string> existing;
  rocksdb::Status list = rocksdb::DB::ListColumnFamilies(db_options, dir, &existing);
  bool fresh = !list.ok() && !std::filesystem::exists(std::filesystem::path(dir) / "CURRENT");
  if (!list.ok() && !fresh) return FromRocks(list, "opening store " + dir);
  if (fresh) {
    if (!options.create_if_missing || options.read_only) {
      return Status::NotFound("no session store at " + dir +
                              " (start sinew-store with --db pointing at an existing store, "
                              "or let it create one)");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create store directory " + dir + ": " + ec.message());
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
  } else {
    std::set<std::string> have(existing.begin(), existing.end());
    for (const auto& f : kFamilies) {
      if (!have.count(f)) {
        return Status::InvalidArgument(dir + " is a RocksDB database but not a Sinew session " +
                                       "store (column family '" + f + "' is missing)");
      }
    }
  }

  rocksdb::ColumnFamilyOptions cf_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& f : kFamilies) descriptors.emplace_back(f, cf_options);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      options.read_only
          ? rocksdb::DB::OpenForReadOnly(db_options, dir, descriptors, &handles, &raw)
          : rocksdb::DB::Open(db_options, dir, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "opening store " + dir);
  return std::unique_ptr<RocksStore>(
      new RocksStore(options, std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
}

RocksStore::RocksStore(StoreOptions options, std::unique_ptr<rocksdb::DB> db,
                       std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : options_(std::move(options)),
      db_(std::move(db)),
      handles_(std::move(handles)),
      events_cf_(handles_[1]),
      sessions_cf_(handles_[2]),
      leases_cf_(handles_[3]),
      index_cf_(handles_[4]),
      idempotency_cf_(handles_[5]) {
  write_options_.sync = options_.durability == Durability::kSync;
}

RocksStore::~RocksStore() {
  for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  db_->Close().PermitUncheckedError();
}

Status RocksStore::CheckWritable() const {
  if (options_.read_only) return Status::FailedPrecondition("store is open read-only");
  return Status::Ok();
}

std::mutex& RocksStore::StripeFor(const std::string& raw_id) {
  return stripes_[std::hash<std::string>{}(raw_id) % kStripes];
}

std::shared_ptr<RocksStore::SessionState> RocksStore::StateFor(const std::string& raw_id) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto& slot = cache_[raw_id];
  if (!slot) slot = std::make_shared<SessionState>();
  return slot;
}

Status RocksStore::LoadLocked(const std::string& raw_id, SessionState* state) {
  if (state->loaded) return Status::Ok();
  const std::string id = keys::FormatSessionId(raw_id);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), sessions_cf_, raw_id, &value);
  if (s.IsNotFound()) {
    state->exists = false;
    return Status::Ok();  // not cached as loaded: the session may be created later
  }
  if (!s.ok()) return FromRocks(s, "reading session " + id);
  if (!state->meta.ParseFromString(value)) {
    return Status::Corruption("metadata of session " + id + " is undecodable");
  }
  SINEW_RETURN_IF_ERROR(LoadLogEnd(raw_id, &state->meta));
  s = db_->Get(rocksdb::ReadOptions(), leases_cf_, raw_id, &value);
  if (s.ok()) {
    if (!state->lease.ParseFromString(value)) {
      return Status::Corruption("lease of session " + id + " is undecodable");
    }
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "reading lease of " + id);
  }
  state->exists = true;
  state->loaded = true;
  return Status::Ok();
}

Status RocksStore::LoadLogEnd(const std::string& raw_id, v1::Session* meta) {
  const std::string id = keys::FormatSessionId(raw_id);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), events_cf_));
  it->SeekForPrev(keys::EventKey(raw_id, UINT64_MAX));
  SINEW_RETURN_IF_ERROR(FromRocks(it->status(), "reading the log end of " + id));
  if (!it->Valid() || !it->key().starts_with(raw_id)) {
    return Status::Corruption("session " + id + " has metadata but no events");
  }
  const uint64_t last = keys::SeqFromEventKey(it->key().ToStringView());
  if (meta->next_seq() > last + 1) {
    return Status::Corruption("session " + id + ": metadata says next_seq " +
                              std::to_string(meta->next_seq()) + " but the log ends at event " +
                              std::to_string(last));
  }
  v1::Event ev;
  if (!ev.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
    return Status::Corruption("session " + id + ": event " + std::to_string(last) +
                              " is undecodable");
  }
  meta->set_next_seq(last + 1);
  meta->set_updated_unix_ms(std::max(meta->updated_unix_ms(), ev.timestamp_unix_ms()));
  return Status::Ok();
}

Result<std::shared_ptr<RocksStore::SessionState>> RocksStore::LoadedState(
    const std::string& raw_id, std::unique_lock<std::mutex>* lock) {
  auto state = StateFor(raw_id);
  *lock = std::unique_lock<std::mutex>(StripeFor(raw_id));
  SINEW_RETURN_IF_ERROR(LoadLocked(raw_id, state.get()));
  if (!state->exists) {
    return Status::NotFound("unknown session " + keys::FormatSessionId(raw_id));
  }
  return state;
}

Result<v1::Session> RocksStore::CreateSession(const v1::CreateSessionRequest& req) {
  SINEW_RETURN_IF_ERROR(CheckWritable());
  SINEW_RETURN_IF_ERROR(ValidateCreateRequest(req, options_.max_event_bytes));
  if (!req.forked_from_session().empty()) {
    SINEW_RETURN_IF_ERROR(keys::ParseSessionId(req.forked_from_session()).status()
                              .WithContext("forked_from_session"));
  }
  if (!req.session_id().empty() && !req.routed_session_id().empty()) {
    return Status::InvalidArgument("give session_id (an import) or routed_session_id, not both");
  }
  const std::string id = !req.session_id().empty()          ? req.session_id()
                         : !req.routed_session_id().empty() ? req.routed_session_id()
                                                            : keys::NewSessionId();
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(id));
  const int64_t now = req.created_unix_ms() > 0 ? req.created_unix_ms() : NowUnixMs();

  v1::Session meta;
  meta.set_id(id);
  meta.set_tenant(req.tenant());
  meta.set_title(req.title());
  *meta.mutable_metadata() = req.metadata();
  meta.set_status(req.initial_status() == v1::SESSION_STATUS_UNSPECIFIED ? v1::SESSION_STATUS_QUEUED
                                                                         : req.initial_status());
  meta.set_created_unix_ms(now);
  meta.set_updated_unix_ms(now);
  meta.set_next_seq(2);
  meta.set_forked_from_session(req.forked_from_session());
  meta.set_forked_at_seq(req.forked_at_seq());
  meta.set_imported(!req.session_id().empty());
  meta.set_parent_session_id(req.parent_session_id());
  meta.set_parent_call_id(req.parent_call_id());

  v1::Event created;
  created.set_session_id(id);
  created.set_seq(1);
  created.set_timestamp_unix_ms(now);
  created.set_type("session_created");
  auto* sc = created.mutable_session_created();
  sc->set_tenant(req.tenant());
  sc->set_title(req.title());
  *sc->mutable_metadata() = req.metadata();
  sc->set_task_json(req.task_json());
  sc->set_forked_from_session(req.forked_from_session());
  sc->set_forked_at_seq(req.forked_at_seq());
  sc->set_parent_session_id(req.parent_session_id());
  sc->set_parent_call_id(req.parent_call_id());

  rocksdb::WriteBatch batch;
  batch.Put(events_cf_, keys::EventKey(raw, 1), created.SerializeAsString());
  batch.Put(sessions_cf_, raw, meta.SerializeAsString());
  batch.Put(index_cf_, keys::AllIndexKey(now, raw), "");
  batch.Put(index_cf_, keys::TenantIndexKey(req.tenant(), now, raw), "");

  auto state = StateFor(raw);
  std::lock_guard<std::mutex> lock(StripeFor(raw));
  SINEW_RETURN_IF_ERROR(LoadLocked(raw, state.get()));
  if (state->exists) {
    return Status::AlreadyExists("session " + id + " exists already; " +
                                 (req.session_id().empty() ? "make a new id" : "import it under a new id"));
  }
  SINEW_RETURN_IF_ERROR(FromRocks(db_->Write(write_options_, &batch), "creating session"));
  state->meta = meta;
  state->lease.Clear();
  state->exists = true;
  state->loaded = true;
  return meta;
}

Result<v1::Session> RocksStore::GetSession(const std::string& session_id) {
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  std::unique_lock<std::mutex> lock;
  SINEW_ASSIGN_OR_RETURN(auto state, LoadedState(raw, &lock));
  v1::Session out = state->meta;
  if (state->lease.epoch() != 0 && state->lease.expires_unix_ms() > NowUnixMs()) {
    *out.mutable_lease() = state->lease;
  }
  return out;
}

Result<v1::ListSessionsResponse> RocksStore::ListSessions(const v1::ListSessionsRequest& req) {
  if (!v1::SessionStatus_IsValid(req.status())) {
    return Status::InvalidArgument("status filter is not a known session status");
  }
  if (req.page_size() > 1000) return Status::InvalidArgument("page_size must be at most 1000");
  const uint32_t page_size = req.page_size() == 0 ? 50 : req.page_size();
  const std::string prefix = req.tenant().empty() ? "A" : keys::TenantIndexPrefix(req.tenant());

  std::string start = prefix;
  if (!req.page_token().empty()) {
    auto decoded = keys::FromHex(req.page_token());
    if (!decoded.ok() || decoded->compare(0, prefix.size(), prefix) != 0) {
      return Status::InvalidArgument("page_token does not belong to this listing; "
                                     "repeat the request without it");
    }
    start = *decoded;
    start.push_back('\0');  // the first key after the token's
  }

  v1::ListSessionsResponse out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), index_cf_));
  uint32_t scanned = 0;
  for (it->Seek(start); it->Valid(); it->Next()) {
    rocksdb::Slice key = it->key();
    if (!key.starts_with(prefix)) break;
    if (out.sessions_size() == static_cast<int>(page_size) || scanned == kMaxListScan) {
      // More remain: the token is the last key we returned or skipped.
      break;
    }
    ++scanned;
    if (key.size() < keys::kIdBytes) return Status::Corruption("malformed index key");
    std::string raw(key.data() + key.size() - keys::kIdBytes, keys::kIdBytes);
    std::unique_lock<std::mutex> lock;
    auto state = LoadedState(raw, &lock);
    if (!state.ok()) {
      return Status::Corruption("index names session " + keys::FormatSessionId(raw) +
                                " but: " + state.status().ToString());
    }
    if (req.status() == v1::SESSION_STATUS_UNSPECIFIED || (*state)->meta.status() == req.status()) {
      *out.add_sessions() = (*state)->meta;
    }
    out.set_next_page_token(keys::ToHex(key.ToStringView()));
  }
  SINEW_RETURN_IF_ERROR(FromRocks(it->status(), "listing sessions"));
  if (!it->Valid() || !it->key().starts_with(prefix)) out.clear_next_page_token();
  return out;
}

Status RocksStore::Checkpoint(const std::string& target_dir) {
  if (target_dir.empty()) return Status::InvalidArgument("checkpoint target_dir is empty");
  if (std::filesystem::exists(target_dir)) {
    return Status::AlreadyExists("checkpoint target " + target_dir +
                                 " exists; name a directory that does not exist yet");
  }
  rocksdb::Checkpoint* raw = nullptr;
  SINEW_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  return FromRocks(checkpoint->CreateCheckpoint(target_dir), "checkpoint to " + target_dir);
}

}  // namespace sinew::store
