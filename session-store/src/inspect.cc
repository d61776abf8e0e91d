#include "sinew/session_store/inspect.h"

#include <rocksdb/db.h>

#include <map>
#include <memory>

#include "keys.h"
#include "rocks_store.h"
#include "sinew/proto/events.pb.h"
#include "sinew/proto/session_store.pb.h"

namespace sinew::store {
namespace {

struct SessionWalk {
  uint64_t last_seq = 0;
  bool has_meta = false;
  v1::Session meta;
  bool saw_status_change = false;
  v1::SessionStatus last_status = v1::SESSION_STATUS_UNSPECIFIED;
};

class Inspector {
 public:
  Inspector(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles)
      : db_(db), handles_(std::move(handles)) {}

  IntegrityReport Run() {
    WalkSessions();
    WalkEvents();
    WalkIndex();
    CrossCheck();
    return std::move(report_);
  }

 private:
  void Problem(std::string id, uint64_t seq, std::string kind, std::string detail) {
    report_.problems.push_back({std::move(id), seq, std::move(kind), std::move(detail)});
  }

  void CheckIterator(rocksdb::Iterator* it, const char* family) {
    if (!it->status().ok()) {
      Problem("", 0, "storage",
              std::string("reading column family ") + family + " failed: " +
                  it->status().ToString());
    }
  }

  void WalkSessions() {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[2]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string raw = it->key().ToString();
      std::string id = keys::FormatSessionId(raw);
      ++report_.sessions;
      SessionWalk& w = walks_[raw];
      if (raw.size() != keys::kIdBytes || !w.meta.ParseFromArray(it->value().data(),
                                                                  static_cast<int>(it->value().size()))) {
        Problem(id, 0, "undecodable_metadata", "session metadata cannot be decoded");
        continue;
      }
      w.has_meta = true;
      if (w.meta.id() != id) {
        Problem(id, 0, "metadata_mismatch", "metadata names session " + w.meta.id());
      }
    }
    CheckIterator(it.get(), "sessions");
  }

  void WalkEvents() {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[1]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rocksdb::Slice key = it->key();
      if (key.size() != keys::kIdBytes + 8) {
        Problem("", 0, "malformed_key", "event key of " + std::to_string(key.size()) + " bytes");
        continue;
      }
      std::string raw(key.data(), keys::kIdBytes);
      std::string id = keys::FormatSessionId(raw);
      uint64_t seq = keys::SeqFromEventKey(key.ToStringView());
      ++report_.events;
      SessionWalk& w = walks_[raw];
      if (seq != w.last_seq + 1) {
        Problem(id, seq, "gap",
                "expected event " + std::to_string(w.last_seq + 1) + ", found " +
                    std::to_string(seq) + " (events " + std::to_string(w.last_seq + 1) + ".." +
                    std::to_string(seq - 1) + " are missing)");
      }
      w.last_seq = seq;
      v1::Event ev;
      if (!ev.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        Problem(id, seq, "undecodable_event", "event bytes cannot be decoded");
        continue;
      }
      if (ev.seq() != seq || ev.session_id() != id) {
        Problem(id, seq, "misplaced_event",
                "event says session " + ev.session_id() + " seq " + std::to_string(ev.seq()));
      }
      if (seq == 1 && !ev.has_session_created()) {
        Problem(id, seq, "bad_first_event", "event 1 is " + EventTypeName(ev) +
                                                 ", not session_created");
      }
      if (ev.has_status_change()) {
        w.saw_status_change = true;
        w.last_status = ev.status_change().to();
      }
    }
    CheckIterator(it.get(), "events");
  }

  void WalkIndex() {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[4]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rocksdb::Slice key = it->key();
      if (key.size() < keys::kIdBytes) continue;
      std::string raw(key.data() + key.size() - keys::kIdBytes, keys::kIdBytes);
      auto found = walks_.find(raw);
      if (found == walks_.end() || !found->second.has_meta) {
        Problem(keys::FormatSessionId(raw), 0, "dangling_index",
                "the session list names a session without metadata");
      }
    }
    CheckIterator(it.get(), "index");
  }

  void CrossCheck() {
    for (const auto& [raw, w] : walks_) {
      std::string id = keys::FormatSessionId(raw);
      if (!w.has_meta) {
        if (w.last_seq > 0) Problem(id, 0, "orphan_events", "events without session metadata");
        continue;
      }
      if (w.last_seq == 0) {
        Problem(id, 0, "no_events", "session has metadata but no events");
        continue;
      }
      // The record's next_seq may lag (plain appends do not rewrite it) but never lead.
      if (w.meta.next_seq() > w.last_seq + 1) {
        Problem(id, 0, "metadata_mismatch",
                "metadata says next_seq " + std::to_string(w.meta.next_seq()) +
                    " but the log ends at event " + std::to_string(w.last_seq));
      }
      if (w.saw_status_change && w.meta.status() != w.last_status) {
        Problem(id, 0, "metadata_mismatch",
                "metadata says status " + SessionStatusName(w.meta.status()) +
                    " but the last status_change in the log is " +
                    SessionStatusName(w.last_status));
      }
    }
  }

  rocksdb::DB* db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::map<std::string, SessionWalk> walks_;
  IntegrityReport report_;
};

}  // namespace

Result<IntegrityReport> InspectStore(const std::string& dir) {
  // Opening through the store validates that this is a Sinew store with clear errors.
  StoreOptions ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  SINEW_RETURN_IF_ERROR(OpenSessionStore(dir, ro).status());

  rocksdb::DBOptions options;
  options.paranoid_checks = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : sinew::store::keys::kColumnFamilies) {
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  SINEW_RETURN_IF_ERROR(FromRocks(
      rocksdb::DB::OpenForReadOnly(options, dir, cfs, &handles, &raw), "opening " + dir));
  std::unique_ptr<rocksdb::DB> db(raw);
  IntegrityReport report = Inspector(db.get(), handles).Run();
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  return report;
}

}  // namespace sinew::store
