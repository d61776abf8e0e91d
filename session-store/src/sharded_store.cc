// ShardedStore: the SessionStore interface over the shards of the map in etcd
// (sinew/session_store/shard_map.h, docs/scale-out.md "Store shards").
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <mutex>
#include <set>

#include "keys.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/coord/prefix_mirror.h"
#include "sinew/session_store/shard_map.h"

namespace sinew::store {
namespace {

namespace json = boost::json;

// A shard that did not answer (down, or too slow), as opposed to one that refused.
bool Unanswered(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

class ShardedStore final : public SessionStore {
 public:
  ShardedStore(std::unique_ptr<coord::EtcdClient> etcd, RemoteOptions options)
      : etcd_(std::move(etcd)), options_(std::move(options)) {}

  Status Start() {
    mirror_ = coord::PrefixMirror::Start(etcd_.get(), std::string(kShardPrefix),
                                         [this](const std::map<std::string, coord::KeyValue>& kvs) { Update(kvs); });
    if (!mirror_->WaitSynced(options_.connect_timeout)) {
      return Status::Unavailable("etcd at " + etcd_->endpoint() + " did not answer for the store shard map");
    }
    Update(mirror_->Snapshot());  // the listing itself: its change callback may still be on its way
    std::lock_guard<std::mutex> lock(mu_);
    if (!map_error_.ok()) return map_error_;
    if (map_.empty()) {
      return Status::Unavailable("the store shard map in etcd at " + etcd_->endpoint() +
                                 " is empty: start sinew-store with --etcd and --shard-id");
    }
    return Status::Ok();
  }

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override {
    if (!req.session_id().empty()) {  // an import keeps its id: it goes where that id maps
      SINEW_ASSIGN_OR_RETURN(SessionStore * shard, ShardFor(req.session_id()));
      return shard->CreateSession(req);
    }
    if (!req.routed_session_id().empty()) {
      // An id the caller derived (a schedule's tick, a sub-agent's from its parent's call):
      // it goes where that id maps, like an import, so that a repeated create finds it there.
      SINEW_ASSIGN_OR_RETURN(SessionStore * shard, ShardFor(req.routed_session_id()));
      return shard->CreateSession(req);
    }
    // A new session may go to any shard: when the one its id maps to does not answer,
    // another id is drawn for another shard, so one shard down does not stop new work.
    std::set<std::string> tried;
    const size_t shards = Shards().size();
    Status last = Status::Unavailable("no store shard is in the map");
    for (int draw = 0; draw < 64 && tried.size() < shards; ++draw) {
      v1::CreateSessionRequest routed = req;
      routed.set_routed_session_id(keys::NewSessionId());
      std::string shard;
      {
        std::lock_guard<std::mutex> lock(mu_);
        SINEW_ASSIGN_OR_RETURN(shard, map_.ShardOf(routed.routed_session_id()));
      }
      if (tried.count(shard)) continue;
      tried.insert(shard);
      auto store = Connection(shard);
      Result<v1::Session> created = store.ok() ? (*store)->CreateSession(routed) : Result<v1::Session>(store.status());
      if (created.ok() || !Unanswered(created.status())) return created;
      last = created.status().WithContext("store shard '" + shard + "'");
      spdlog::warn("new session: {}; trying another shard", last.message());
    }
    return last;
  }

  Result<v1::Session> GetSession(const std::string& id) override {
    return Route<v1::Session>(id, [&](SessionStore* s) { return s->GetSession(id); });
  }
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override {
    return Route<v1::Session>(req.session_id(), [&](SessionStore* s) { return s->SetStatus(req); });
  }
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override {
    return Route<v1::AppendResponse>(req.session_id(), [&](SessionStore* s) { return s->Append(req); });
  }
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return Route<v1::GetEventsResponse>(req.session_id(), [&](SessionStore* s) { return s->GetEvents(req); });
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    return Route<v1::ReadEventBytesResponse>(req.session_id(),
                                             [&](SessionStore* s) { return s->ReadEventBytes(req); });
  }
  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& id, uint64_t from_seq) override {
    return Route<std::unique_ptr<EventWatcher>>(id, [&](SessionStore* s) { return s->Watch(id, from_seq); });
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override {
    return Route<v1::Lease>(id, [&](SessionStore* s) { return s->AcquireLease(id, holder, ttl); });
  }
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override {
    return Route<v1::Lease>(id, [&](SessionStore* s) { return s->RenewLease(id, owner, epoch, ttl); });
  }
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override {
    auto r = Route<bool>(id, [&](SessionStore* s) -> Result<bool> {
      SINEW_RETURN_IF_ERROR(s->ReleaseLease(id, owner, epoch));
      return true;
    });
    return r.status();
  }
  Status Checkpoint(const std::string&) override {
    return Status::Unimplemented("a sharded store has no single checkpoint; checkpoint each shard's sinew-store");
  }
  // A record lives on the shard of the session it names.
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override {
    SINEW_ASSIGN_OR_RETURN(SessionStore * shard, ShardFor(req.session_id()));
    return shard->AppendAudit(req);
  }

  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override;
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override;

 private:
  // Per shard, where the merged listing stands: the shard's page token and how many of
  // that page were returned already.
  struct Cursor {
    std::string token;
    uint32_t skip = 0;
    bool done = false;
  };

  void Update(const std::map<std::string, coord::KeyValue>& kvs) {
    std::map<std::string, std::string> keys;
    for (const auto& [k, kv] : kvs) keys[k] = kv.value;
    auto map = ShardMap::FromKeys(keys);
    std::lock_guard<std::mutex> lock(mu_);
    if (!map.ok()) {
      // Keep routing by the last good map; a bad write to etcd must not strand sessions.
      spdlog::error("store shard map: {}; still using the previous map", map.status().message());
      map_error_ = map.status();
      return;
    }
    map_error_ = Status::Ok();
    map_ = std::move(map).value();
  }

  // The store at shard `shard`'s address, connected on first use.
  Result<SessionStore*> Connection(const std::string& shard) {
    std::string address;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.addresses().find(shard);
      if (it == map_.addresses().end()) return Status::NotFound("no store shard '" + shard + "' in the map");
      address = it->second;
      auto c = connections_.find(address);
      if (c != connections_.end()) return c->second.get();
    }
    // Lazily: a shard that is down must not hold every caller for connect_timeout (its
    // calls fail kUnavailable at once and the caller moves on; docs/scale-out.md).
    RemoteOptions lazy = options_;
    lazy.wait_for_server = false;
    auto store = ConnectSessionStore(address, lazy);
    if (!store.ok()) return store.status().WithContext("store shard '" + shard + "' at " + address);
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = connections_[address];
    if (!slot) slot = std::move(store).value();
    return slot.get();
  }

  Result<SessionStore*> ShardFor(const std::string& id) {
    std::string shard;
    {
      std::lock_guard<std::mutex> lock(mu_);
      SINEW_ASSIGN_OR_RETURN(shard, map_.ShardOf(id));
    }
    return Connection(shard);
  }

  std::vector<std::string> Shards() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [id, address] : map_.addresses()) out.push_back(id);
    return out;
  }

  // Runs `call` on the session's shard; a kNotFound there is checked on the other shards
  // (a session created by a client whose map was out of date).
  template <typename T, typename Fn>
  Result<T> Route(const std::string& id, Fn call) {
    std::string home;
    {
      std::lock_guard<std::mutex> lock(mu_);
      SINEW_ASSIGN_OR_RETURN(home, map_.ShardOf(id));
    }
    SINEW_ASSIGN_OR_RETURN(SessionStore * store, Connection(home));
    Result<T> r = call(store);
    if (r.ok() || r.status().code() != StatusCode::kNotFound) return r;
    for (const std::string& shard : Shards()) {
      if (shard == home) continue;
      auto other = Connection(shard);
      if (!other.ok()) continue;
      Result<T> there = call(*other);
      if (there.ok() || there.status().code() != StatusCode::kNotFound) {
        spdlog::warn("session {} is on store shard '{}', not on '{}' where the map puts it", id, shard, home);
        return there;
      }
    }
    return r;
  }

  static std::string EncodeCursors(const std::map<std::string, Cursor>& cursors);
  static Result<std::map<std::string, Cursor>> DecodeCursors(const std::string& token);

  std::unique_ptr<coord::EtcdClient> etcd_;
  const RemoteOptions options_;
  std::unique_ptr<coord::PrefixMirror> mirror_;
  std::mutex mu_;
  ShardMap map_;                                                       // guarded by mu_
  Status map_error_;                                                   // guarded by mu_
  std::map<std::string, std::unique_ptr<SessionStore>> connections_;  // by address; guarded by mu_
};

std::string ShardedStore::EncodeCursors(const std::map<std::string, Cursor>& cursors) {
  json::object o;
  for (const auto& [shard, c] : cursors) {
    o[shard] = c.done ? json::value(nullptr) : json::value(json::array{json::value(c.token), json::value(c.skip)});
  }
  return keys::ToHex(json::serialize(o));
}

Result<std::map<std::string, ShardedStore::Cursor>> ShardedStore::DecodeCursors(const std::string& token) {
  const Status bad = Status::InvalidArgument("page_token is not one this sharded store gave");
  auto text = keys::FromHex(token);
  if (!text.ok()) return bad;
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  if (ec || !v.is_object()) return bad;
  std::map<std::string, Cursor> cursors;
  for (const auto& [shard, c] : v.as_object()) {
    Cursor& cur = cursors[std::string(shard)];
    if (c.is_null()) {
      cur.done = true;
      continue;
    }
    if (!c.is_array() || c.as_array().size() != 2 || !c.as_array()[0].is_string() ||
        !c.as_array()[1].is_int64() || c.as_array()[1].as_int64() < 0 || c.as_array()[1].as_int64() > 1000) {
      return bad;
    }
    cur.token = std::string(c.as_array()[0].as_string());
    cur.skip = static_cast<uint32_t>(c.as_array()[1].as_int64());
  }
  return cursors;
}

Result<v1::ListSessionsResponse> ShardedStore::ListSessions(const v1::ListSessionsRequest& req) {
  const uint32_t page_size = req.page_size() == 0 ? 50 : req.page_size();
  if (page_size > 1000) return Status::InvalidArgument("page_size is at most 1000");
  std::map<std::string, Cursor> cursors;
  if (!req.page_token().empty()) {
    SINEW_ASSIGN_OR_RETURN(cursors, DecodeCursors(req.page_token()));
  }
  struct Page {
    std::string shard;
    v1::ListSessionsResponse resp;
    size_t next = 0;  // first entry not merged yet
  };
  std::vector<Page> pages;
  std::vector<std::string> unavailable;
  const std::vector<std::string> shards = Shards();
  for (const std::string& shard : shards) {
    Cursor& cur = cursors[shard];  // a shard new since the last page starts at its beginning
    if (cur.done) continue;
    auto connected = Connection(shard);
    if (!connected.ok() && req.allow_partial() && Unanswered(connected.status())) {
      unavailable.push_back(shard);
      cur.done = true;
      continue;
    }
    if (!connected.ok()) return connected.status();
    SessionStore* store = *connected;
    v1::ListSessionsRequest one = req;
    one.set_page_size(page_size + cur.skip > 1000 ? 1000 : page_size + cur.skip);
    one.set_page_token(cur.token);
    Page p{shard, {}, cur.skip};
    auto resp = store->ListSessions(one);
    if (!resp.ok() && req.allow_partial() && Unanswered(resp.status())) {
      // Left out of this listing, its later pages included (see the proto).
      unavailable.push_back(shard);
      cur.done = true;
      continue;
    }
    if (!resp.ok()) return resp.status().WithContext("store shard '" + shard + "'");
    p.resp = std::move(resp).value();
    pages.push_back(std::move(p));
  }
  // Newest first across shards: by creation time, then id, both descending (the order
  // each shard lists in).
  v1::ListSessionsResponse out;
  while (static_cast<uint32_t>(out.sessions_size()) < page_size) {
    Page* best = nullptr;
    for (Page& p : pages) {
      if (p.next >= static_cast<size_t>(p.resp.sessions_size())) continue;
      const v1::Session& s = p.resp.sessions(static_cast<int>(p.next));
      if (best == nullptr) {
        best = &p;
        continue;
      }
      const v1::Session& b = best->resp.sessions(static_cast<int>(best->next));
      if (s.created_unix_ms() > b.created_unix_ms() ||
          (s.created_unix_ms() == b.created_unix_ms() && s.id() > b.id())) {
        best = &p;
      }
    }
    if (best == nullptr) break;
    *out.add_sessions() = best->resp.sessions(static_cast<int>(best->next));
    ++best->next;
  }
  bool more = false;
  for (const Page& p : pages) {
    Cursor& cur = cursors[p.shard];
    if (p.next < static_cast<size_t>(p.resp.sessions_size())) {
      cur.skip = static_cast<uint32_t>(p.next);  // the same page again, past what was returned
      more = true;
    } else if (p.resp.next_page_token().empty()) {
      cur.done = true;
    } else {
      cur.token = p.resp.next_page_token();
      cur.skip = 0;
      more = true;
    }
  }
  if (!unavailable.empty() && unavailable.size() == shards.size()) {
    return Status::Unavailable("no store shard answers (" + std::to_string(shards.size()) + " in the map)");
  }
  for (const auto& shard : unavailable) out.add_unavailable_shards(shard);
  if (more) out.set_next_page_token(EncodeCursors(cursors));
  return out;
}

// Every shard's records after its cursor (the id of the last record taken from it),
// merged oldest first by id (an id starts with the millisecond it was written in). The
// token maps shard -> cursor.
Result<v1::ListAuditResponse> ShardedStore::ListAudit(const v1::ListAuditRequest& req) {
  const uint32_t page_size = req.page_size() == 0 ? 50 : req.page_size();
  if (page_size > 1000) return Status::InvalidArgument("page_size is at most 1000");
  std::map<std::string, std::string> cursors;
  if (!req.page_token().empty()) {
    const Status bad = Status::InvalidArgument("page_token is not one this sharded store gave");
    auto text = keys::FromHex(req.page_token());
    if (!text.ok()) return bad;
    boost::system::error_code ec;
    json::value v = json::parse(*text, ec);
    if (ec || !v.is_object()) return bad;
    for (const auto& [shard, c] : v.as_object()) {
      if (!c.is_string()) return bad;
      cursors[std::string(shard)] = std::string(c.as_string());
    }
  }
  std::vector<std::pair<std::string, v1::ListAuditResponse>> pages;
  for (const std::string& shard : Shards()) {
    SINEW_ASSIGN_OR_RETURN(SessionStore * store, Connection(shard));
    v1::ListAuditRequest one = req;
    one.set_page_size(page_size);
    one.set_page_token(cursors[shard]);
    auto resp = store->ListAudit(one);
    if (!resp.ok()) return resp.status().WithContext("store shard '" + shard + "'");
    pages.emplace_back(shard, std::move(resp).value());
  }
  std::vector<int> next(pages.size(), 0);
  v1::ListAuditResponse out;
  while (static_cast<uint32_t>(out.records_size()) < page_size) {
    int best = -1;
    for (size_t i = 0; i < pages.size(); ++i) {
      if (next[i] >= pages[i].second.records_size()) continue;
      const v1::AuditRecord& r = pages[i].second.records(next[i]);
      if (best < 0) {
        best = static_cast<int>(i);
        continue;
      }
      const v1::AuditRecord& b = pages[best].second.records(next[best]);
      if (r.id() < b.id()) best = static_cast<int>(i);
    }
    if (best < 0) break;
    const v1::AuditRecord& taken = pages[best].second.records(next[best]++);
    cursors[pages[best].first] = taken.id();
    *out.add_records() = taken;
  }
  bool more = false;
  for (size_t i = 0; i < pages.size(); ++i) {
    if (next[i] < pages[i].second.records_size() || !pages[i].second.next_page_token().empty()) more = true;
  }
  if (more) {
    json::object o;
    for (const auto& [shard, cursor] : cursors) {
      if (!cursor.empty()) o[shard] = cursor;
    }
    out.set_next_page_token(keys::ToHex(json::serialize(o)));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<SessionStore>> ConnectShardedSessionStore(const std::string& etcd_endpoint,
                                                                 const RemoteOptions& options,
                                                                 const GrpcTlsOptions& etcd_tls) {
  SINEW_ASSIGN_OR_RETURN(auto etcd, coord::EtcdClient::Connect(etcd_endpoint, std::chrono::seconds(5), etcd_tls));
  auto store = std::make_unique<ShardedStore>(std::move(etcd), options);
  SINEW_RETURN_IF_ERROR(store->Start());
  return std::unique_ptr<SessionStore>(std::move(store));
}

}  // namespace sinew::store
