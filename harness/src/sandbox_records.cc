#include "sandbox_records.h"

#include <boost/json.hpp>

#include "api_handler.h"

namespace sinew::harness {
namespace {

// No API key's tenant starts with a control character (a config could spell one, but
// nobody would): the records of tenant "t" live under "\x1fsandboxes:t".
constexpr std::string_view kRecordTenantPrefix = "\x1fsandboxes:";

v1::SessionStatus StatusOf(const std::string& state) {
  if (state == "paused") return v1::SESSION_STATUS_WAITING_FOR_INPUT;
  if (state == "ended") return v1::SESSION_STATUS_FAILED;
  if (state == "deleted") return v1::SESSION_STATUS_CANCELLED;
  return v1::SESSION_STATUS_RUNNING;
}

std::string StateOf(v1::SessionStatus status) {
  switch (status) {
    case v1::SESSION_STATUS_WAITING_FOR_INPUT:
      return "paused";
    case v1::SESSION_STATUS_FAILED:
      return "ended";
    case v1::SESSION_STATUS_CANCELLED:
      return "deleted";
    default:
      return "ready";
  }
}

std::string Meta(const v1::Session& s, const std::string& key) {
  auto it = s.metadata().find(key);
  return it == s.metadata().end() ? "" : it->second;
}

SandboxRecord FromSession(const v1::Session& s, const std::string& tenant) {
  SandboxRecord r;
  r.id = s.id();
  r.tenant = tenant;
  r.state = StateOf(s.status());
  r.sandbox_id = Meta(s, "sandbox_id");
  r.host_id = Meta(s, "host_id");
  r.host_address = Meta(s, "host_address");
  r.resources_json = Meta(s, "resources");
  r.from_snapshot = Meta(s, "from_snapshot");
  r.created_unix_ms = s.created_unix_ms();
  r.updated_unix_ms = s.updated_unix_ms();
  return r;
}

bool IsLive(v1::SessionStatus status) {
  return status == v1::SESSION_STATUS_RUNNING || status == v1::SESSION_STATUS_WAITING_FOR_INPUT;
}

}  // namespace

SandboxUse UseOf(const std::string& resources_json) {
  SandboxUse ask;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(resources_json, ec);
  if (ec || !v.is_object()) return ask;
  auto read = [&](const char* key) -> uint64_t {
    const boost::json::value* f = v.as_object().if_contains(key);
    if (f == nullptr) return 0;
    if (f->is_uint64()) return f->as_uint64();
    if (f->is_int64() && f->as_int64() > 0) return static_cast<uint64_t>(f->as_int64());
    return 0;
  };
  ask.memory_bytes = read("memory_bytes");
  ask.cpu_millis = read("cpu_millis");
  return ask;
}

std::string SandboxRecords::RecordTenant(const std::string& tenant) {
  return std::string(kRecordTenantPrefix) + tenant;
}

Result<SandboxRecord> SandboxRecords::Create(const std::string& tenant,
                                             const NewSandboxRecord& sandbox) {
  v1::CreateSessionRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_title("sandbox " + sandbox.sandbox_id);
  req.set_initial_status(v1::SESSION_STATUS_RUNNING);
  auto& meta = *req.mutable_metadata();
  meta["kind"] = "sandbox";
  meta["sandbox_id"] = sandbox.sandbox_id;
  meta["host_id"] = sandbox.host_id;
  meta["host_address"] = sandbox.host_address;
  meta["resources"] = sandbox.resources_json;
  meta["from_snapshot"] = sandbox.from_snapshot;
  SINEW_ASSIGN_OR_RETURN(v1::Session created, store_->CreateSession(req));
  return FromSession(created, tenant);
}

Result<SandboxRecord> SandboxRecords::Get(const std::string& id, const std::string& tenant) {
  if (!IsSessionId(id))
    return Status::NotFound("no sandbox '" + id + "' (ids are 32 lower-case hex digits)");
  auto meta = store_->GetSession(id);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) return Status::NotFound("no sandbox " + id);
    return meta.status();
  }
  // Another tenant's sandbox, and a session, are indistinguishable from a missing one.
  if (meta->tenant() != RecordTenant(tenant)) return Status::NotFound("no sandbox " + id);
  SandboxRecord record = FromSession(*meta, tenant);
  if (!IsLive(meta->status()) && meta->next_seq() > 1) {
    // Why it ended: the reason of its last status change.
    v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(meta->next_seq() - 1);
    req.set_limit(1);
    auto events = store_->GetEvents(req);
    if (events.ok() && events->events_size() == 1 && events->events(0).has_status_change()) {
      record.reason = events->events(0).status_change().reason();
    }
  }
  return record;
}

Result<SandboxRecord> SandboxRecords::SetState(const SandboxRecord& record,
                                               const std::string& state,
                                               const std::string& reason) {
  v1::SetStatusRequest req;
  req.set_session_id(record.id);
  req.set_status(StatusOf(state));
  req.set_reason(reason);
  SINEW_ASSIGN_OR_RETURN(v1::Session updated, store_->SetStatus(req));
  SandboxRecord out = FromSession(updated, record.tenant);
  out.state = state;
  out.reason = reason;
  return out;
}

Result<SandboxRecords::Page> SandboxRecords::List(const std::string& tenant, uint32_t limit,
                                                  const std::string& page_token,
                                                  bool include_ended) {
  v1::ListSessionsRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_page_size(limit);
  req.set_page_token(page_token);
  SINEW_ASSIGN_OR_RETURN(v1::ListSessionsResponse resp, store_->ListSessions(req));
  Page page;
  for (const auto& s : resp.sessions()) {
    if (include_ended || IsLive(s.status())) page.records.push_back(FromSession(s, tenant));
  }
  page.next_page_token = resp.next_page_token();
  return page;
}

Result<uint64_t> SandboxRecords::CountLive(const std::string& tenant, uint64_t stop_at) {
  uint64_t count = 0;
  for (auto status : {v1::SESSION_STATUS_RUNNING, v1::SESSION_STATUS_WAITING_FOR_INPUT}) {
    v1::ListSessionsRequest req;
    req.set_tenant(RecordTenant(tenant));
    req.set_status(status);
    req.set_page_size(1000);
    while (count < stop_at) {
      SINEW_ASSIGN_OR_RETURN(v1::ListSessionsResponse resp, store_->ListSessions(req));
      count += static_cast<uint64_t>(resp.sessions_size());
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
  }
  return count;
}

Result<SandboxUse> SandboxRecords::ReadyUse(const std::string& tenant) {
  SandboxUse use;
  v1::ListSessionsRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_status(v1::SESSION_STATUS_RUNNING);
  req.set_page_size(1000);
  while (true) {
    SINEW_ASSIGN_OR_RETURN(v1::ListSessionsResponse resp, store_->ListSessions(req));
    for (const auto& s : resp.sessions()) {
      const SandboxUse ask = UseOf(Meta(s, "resources"));
      use.memory_bytes += ask.memory_bytes;
      use.cpu_millis += ask.cpu_millis;
    }
    if (resp.next_page_token().empty()) return use;
    req.set_page_token(resp.next_page_token());
  }
}

Result<std::vector<int64_t>> SandboxRecords::CreatedSince(const std::string& tenant,
                                                          int64_t since_unix_ms) {
  std::vector<int64_t> out;
  v1::ListSessionsRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_page_size(100);
  while (true) {
    SINEW_ASSIGN_OR_RETURN(v1::ListSessionsResponse resp, store_->ListSessions(req));
    for (const auto& s : resp.sessions()) {
      if (s.created_unix_ms() < since_unix_ms) return out;  // newest first: the rest are older
      out.push_back(s.created_unix_ms());
    }
    if (resp.next_page_token().empty()) return out;
    req.set_page_token(resp.next_page_token());
  }
}

}  // namespace sinew::harness
