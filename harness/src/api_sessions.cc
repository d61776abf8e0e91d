// ApiHandler: the /v1/sessions endpoints.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "api_handler.h"
#include "outgoing_http.h"
#include "json_util.h"
#include "log_state.h"
#include "task_spec.h"
#include "sinew/json_fields.h"
#include "sinew/proto_json.h"
#include "sinew/trace.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadString;
using json_fields::RejectUnknownKeys;

ApiResponse SessionResponse(int status, const v1::Session& s) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(json::object{{"session", SessionToJson(s)}});
  return r;
}

// Parses a decimal query value; kInvalidArgument names it.
Result<uint64_t> QueryUint(const std::string& query, const char* key, uint64_t fallback, uint64_t min,
                           uint64_t max) {
  bool present = false;
  std::string text = QueryParam(query, key, &present);
  if (!present) return fallback;
  auto v = ParseDecimal(text, max);
  if (!v || *v < min) {
    return Status::InvalidArgument(std::string("query parameter ") + key + " must be an integer in [" +
                                   std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return *v;
}

// The advertised URL of the live lease's holder of a session, or "" when there is none
// (or it is not an http(s) URL).
std::string HolderUrl(const Result<v1::Session>& meta) {
  if (!meta.ok() || !meta->has_lease()) return "";
  const std::string& url = meta->lease().holder_url();
  // Only an http(s) URL is followed: the lease is data from the store, not a command.
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) return "";
  return url;
}

// A request for a session between two drivers: nothing is wrong with it, and it can be
// taken in `retry_after_s` seconds at the latest. Sets *out to the 503 with Retry-After a
// client retries (docs/harness.md, "Errors"); returns the status for the caller's path.
Status BetweenDrivers(const std::string& message, int64_t retry_after_s, ApiResponse* out) {
  *out = ApiHandler::Error(503, "unavailable", message);
  out->headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  return Status::Unavailable(message);
}

}  // namespace

Result<v1::CreateSessionRequest> ApiHandler::NewSessionRequest(std::string_view task_body,
                                                               const std::string& tenant) const {
  SINEW_ASSIGN_OR_RETURN(TaskSpec task, ParseTaskRequest(task_body, *deps_.config));
  ApplyTenantApprovals(*deps_.config, tenant, &task);
  // Secrets never reach the log, not even when a user pastes one into a task.
  task.prompt = deps_.vault->Redact(task.prompt);
  task.title = deps_.vault->Redact(task.title);
  task.system = deps_.vault->Redact(task.system);
  for (auto& [k, v] : task.metadata) v = deps_.vault->Redact(v);
  v1::CreateSessionRequest req;
  req.set_tenant(tenant);
  req.set_title(task.title.empty() ? std::string(Utf8Prefix(task.prompt, 80)) : task.title);
  for (const auto& [k, v] : task.metadata) (*req.mutable_metadata())[k] = v;
  req.set_task_json(TaskToJson(task));
  req.set_initial_status(v1::SESSION_STATUS_QUEUED);
  return req;
}

ApiResponse ApiHandler::CreateSession(const ApiRequest& r, const std::string& tenant) {
  auto req = NewSessionRequest(r.body, tenant);
  if (!req.ok()) return FromStatus(req.status());
  std::unique_lock<std::mutex> admission;
  if (auto refused = AdmitSession(tenant, true, &admission)) return *refused;
  // One write: the task (prompt included) is event 1; the driver writes the prompt's
  // user_message together with its first model_request.
  auto meta = deps_.store->CreateSession(*req);
  if (!meta.ok()) return FromStatus(meta.status());
  deps_.metrics->Add("sinew_harness_sessions_created_total", "");
  control_->Wake(meta->id());
  ApiResponse created = SessionResponse(201, *meta);
  created.created_session = meta->id();
  return created;
}

Result<v1::Session> ApiHandler::CreateTickSession(const std::string& tenant, const std::string& task_json,
                                                  const std::string& schedule_id, int64_t tick_unix_ms,
                                                  const std::string& session_id) {
  auto req = NewSessionRequest(task_json, tenant);
  if (!req.ok()) return Status::InvalidArgument("the task template is not valid now: " + req.status().message());
  (*req->mutable_metadata())["schedule_id"] = schedule_id;
  (*req->mutable_metadata())["schedule_tick_unix_ms"] = std::to_string(tick_unix_ms);
  req->set_routed_session_id(session_id);
  std::unique_lock<std::mutex> admission;
  if (auto refused = AdmitSession(tenant, true, &admission)) {
    std::string message = "refused by the tenant's quota";
    boost::system::error_code ec;
    auto body = json::parse(refused->body, ec);
    if (!ec && body.is_object() && body.as_object().contains("error")) {
      message = json::value_to<std::string>(body.at("error").at("message"));
    }
    return refused->status == 429 ? Status::ResourceExhausted(message) : Status::Unavailable(message);
  }
  SINEW_ASSIGN_OR_RETURN(v1::Session meta, deps_.store->CreateSession(*req));
  deps_.metrics->Add("sinew_harness_sessions_created_total", "");
  control_->Wake(meta.id());
  return meta;
}

ApiResponse ApiHandler::ListSessions(const std::string& query, const std::string& tenant) {
  v1::ListSessionsRequest req;
  req.set_tenant(tenant);
  bool has_status = false;
  const std::string status = QueryParam(query, "status", &has_status);
  if (has_status) {
    v1::SessionStatus s = StatusFromName(status);
    if (s == v1::SESSION_STATUS_UNSPECIFIED) {
      return Error(400, "invalid_argument",
                   "status must be one of queued, running, waiting_for_input, completed, failed, cancelled, requires_action");
    }
    req.set_status(s);
  }
  auto limit = QueryUint(query, "limit", 50, 1, 1000);
  if (!limit.ok()) return FromStatus(limit.status());
  req.set_page_size(static_cast<uint32_t>(*limit));
  // Tokens are what this API issued: hex. Anything else (undecodable bytes included,
  // which a proto string cannot carry) is the caller's mistake.
  const std::string page_token = QueryParam(query, "page_token");
  if (page_token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Error(400, "invalid_argument",
                 "page_token is not one this API issued; repeat the request without it");
  }
  req.set_page_token(page_token);
  auto resp = deps_.store->ListSessions(req);
  if (!resp.ok()) return FromStatus(resp.status());
  json::array sessions;
  for (const auto& s : resp->sessions()) sessions.push_back(SessionToJson(s));
  ApiResponse out;
  out.body = json::serialize(
      json::object{{"sessions", std::move(sessions)}, {"next_page_token", resp->next_page_token()}});
  return out;
}

ApiResponse ApiHandler::GetSession(const std::string& id, const std::string& tenant) {
  auto meta = OwnedSession(id, tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  auto body = SessionJsonWithApprovals(*meta);
  if (!body.ok()) return FromStatus(body.status());
  // A session that may start sub-agents lists them (its task says whether it may; only
  // then is its log read).
  auto first = ReadEvents(id, 1);
  if (!first.ok()) return FromStatus(first.status());
  if (!first->empty() && first->front().has_session_created()) {
    auto task = TaskFromJson(first->front().session_created().task_json(), *deps_.config);
    if (task.ok() && task->delegate.enabled) {
      auto log = ReadEvents(id, meta->next_seq() - 1);
      if (!log.ok()) return FromStatus(log.status());
      json::array children;
      for (const auto& c : ReadLogState(*log).children) {
        children.push_back(json::object{{"session_id", c.session_id}, {"call_id", c.call_id}});
      }
      (*body)["children"] = std::move(children);
    }
  }
  ApiResponse out;
  out.body = json::serialize(json::object{{"session", std::move(*body)}});
  return out;
}

ApiResponse ApiHandler::GetEvents(const std::string& id, const std::string& query,
                                  const std::string& tenant) {
  auto meta = OwnedSession(id, tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  auto after = QueryUint(query, "after", 0, 0, kMaxResumeSeq);
  if (!after.ok()) return FromStatus(after.status());
  auto limit = QueryUint(query, "limit", 100, 1, 1000);
  if (!limit.ok()) return FromStatus(limit.status());
  v1::GetEventsRequest req;
  req.set_session_id(id);
  req.set_from_seq(*after + 1);
  req.set_limit(static_cast<uint32_t>(*limit));
  Result<v1::GetEventsResponse> resp = v1::GetEventsResponse();
  if (*after + 1 < meta->next_seq()) {
    resp = deps_.store->GetEvents(req);
    if (!resp.ok()) return FromStatus(resp.status());
  }
  std::string body = "{\"events\":[";
  for (int i = 0; i < resp->events_size(); ++i) {
    if (i > 0) body += ",";
    body += ProtoJsonLine(resp->events(i));
  }
  body += "],\"next_seq\":" + std::to_string(resp->events_size() > 0 ? resp->next_seq() : meta->next_seq()) + "}";
  ApiResponse out;
  out.body = std::move(body);
  return out;
}

Result<v1::Session> ApiHandler::AppendUndriven(const ApiRequest& r, const v1::Session& known,
                                               std::vector<v1::Event> events, bool reject_terminal,
                                               ApiResponse* forwarded) {
  const std::string& id = known.id();
  // Appends `events` after `meta`'s last event (lease_epoch 0: under no lease) and reads
  // the session back. A refusal because a driver took the session over in between (a live
  // lease, or its log moved on) is a 503 to retry, as below: the request itself is fine.
  auto append = [&](const v1::Session& meta, uint64_t lease_epoch) -> Result<v1::Session> {
    if (reject_terminal && IsTerminal(meta.status())) {
      return Status::FailedPrecondition("session " + id + " is already " + store::SessionStatusName(meta.status()));
    }
    v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(meta.next_seq());
    req.set_lease_epoch(lease_epoch);
    for (auto& ev : events) {
      if (ev.has_status_change()) ev.mutable_status_change()->set_from(meta.status());
      *req.add_events() = std::move(ev);
    }
    auto appended = deps_.store->Append(req);
    if (!appended.ok()) {
      const StatusCode code = appended.status().code();
      if (code == StatusCode::kFailedPrecondition || code == StatusCode::kAborted) {
        return BetweenDrivers("session " + id + " was taken over while this request was written (" +
                                  appended.status().message() + "); retry",
                              1, forwarded);
      }
      return appended.status();
    }
    return deps_.store->GetSession(id);
  };
  // An imported session that no driver ever held is a record, not work (docs/harness.md,
  // "Imported sessions are records"): an audit event or a cancel is appended to it under
  // no lease, since holding one marks a session as driven and the scanner would wake it.
  // Only a message (a user_message) makes it work.
  const bool wakes =
      std::any_of(events.begin(), events.end(), [](const v1::Event& e) { return e.has_user_message(); });
  // The caller's read will do: if a driver took the session since, the store refuses the
  // append (its expected_next_seq or the live lease) and the client retries.
  if (!wakes && known.imported() && known.lease_epoch() == 0) return append(known, 0);
  const std::string api_owner = deps_.owner + "/api";
  const auto ttl = std::chrono::milliseconds(deps_.config->lease_ttl_ms);
  auto lease = deps_.store->AcquireLease(id, {api_owner, deps_.config->advertise_url}, ttl);
  if (!lease.ok()) {
    if (lease.status().code() != StatusCode::kFailedPrecondition) return lease.status();
    // Another harness drives it: hand the request to the URL its lease names, once.
    auto holder = deps_.store->GetSession(id);
    const std::string holder_url = HolderUrl(holder);
    // Its holder is not reachable (dead, or about to end): its lease says until when.
    auto unreachable = [&](const std::string& why) -> Status {
      int64_t wait_ms = deps_.config->lease_ttl_ms;
      if (holder.ok() && holder->has_lease()) wait_ms = holder->lease().expires_unix_ms() - NowUnixMs();
      const int64_t seconds =
          std::clamp<int64_t>((wait_ms + 999) / 1000, 1, (deps_.config->lease_ttl_ms + 999) / 1000);
      return BetweenDrivers("the harness driving session " + id + " " + why + "; retry in " +
                                std::to_string(seconds) + " s (its lease ends by then)",
                            seconds, forwarded);
    };
    if (r.forwarded || holder_url.empty() || holder_url == deps_.config->advertise_url) {
      return unreachable("cannot take this request now");
    }
    HttpRequest fwd;
    fwd.method = r.method;
    fwd.url = holder_url + r.target;
    fwd.headers = {"Authorization: " + r.authorization, "Content-Type: " + r.content_type,
                   "X-Sinew-Forwarded: 1"};
    // The request's trace goes on to the harness that serves it.
    if (const std::string tp = OutgoingTraceparent(); !tp.empty()) fwd.headers.push_back("traceparent: " + tp);
    fwd.body = r.body;
    fwd.timeout_ms = 10000;
    fwd.tls.ca_file = deps_.config->tls.ca_file;
    auto resp = PerformHttp(fwd);
    if (!resp.ok()) return unreachable("did not answer (" + resp.status().message() + ")");
    forwarded->status = static_cast<int>(resp->status);
    forwarded->body = resp->body;
    // The driver's 429 or 503 keeps its hint.
    if (const auto retry = resp->Header("retry-after"); !retry.empty()) {
      forwarded->headers.emplace_back("Retry-After", std::string(retry));
    }
    return Status::Aborted("forwarded");
  }
  auto meta = deps_.store->GetSession(id);
  auto after = meta.ok() ? append(*meta, lease->epoch()) : Result<v1::Session>(meta.status());
  (void)deps_.store->ReleaseLease(id, api_owner, lease->epoch());
  return after;
}

ApiResponse ApiHandler::PostMessage(const ApiRequest& r, const std::string& id, const std::string& tenant) {
  auto meta = OwnedSession(id, tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  auto body = ParseObject(r.body, "request body");
  if (!body.ok()) return FromStatus(body.status());
  Status keys = RejectUnknownKeys(*body, "text", "body");
  if (!keys.ok()) return FromStatus(keys);
  std::string text;
  Status read = ReadString(*body, "text", "body", &text);
  if (!read.ok()) return FromStatus(read);
  if (text.empty()) return Error(400, "invalid_argument", "body.text is required (a non-empty string)");
  if (control_->DeliverMessage(id, text)) return SessionResponse(202, *meta);
  v1::Event ev;
  ev.mutable_user_message()->set_text(deps_.vault->Redact(text));
  ApiResponse forwarded;
  auto after = AppendUndriven(r, *meta, {ev}, false, &forwarded);
  if (!after.ok()) {
    if (forwarded.status != 200 || !forwarded.body.empty()) return forwarded;
    return FromStatus(after.status());
  }
  control_->Wake(id);
  return SessionResponse(202, *after);
}

ApiResponse ApiHandler::Cancel(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto meta = OwnedSession(id, caller.tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  if (IsTerminal(meta->status())) {
    return Error(409, "conflict", "session " + id + " is already " + store::SessionStatusName(meta->status()));
  }
  v1::Event audit = AuditEvent(r, caller, "cancel", "");
  // The tenant's audit log lists it too; the session's own log has it before the cancel.
  auto recorded = [&] {
    Status s = RecordAccess(id, audit);
    if (!s.ok()) spdlog::warn("session {}: cancelled, but not recorded in the tenant audit log: {}", id, s.message());
  };
  if (control_->DeliverCancel(id, "cancelled by the user", audit)) {
    recorded();
    return SessionResponse(202, *meta);
  }
  v1::Event ev;
  ev.mutable_status_change()->set_to(v1::SESSION_STATUS_CANCELLED);
  ev.mutable_status_change()->set_reason("cancelled by the user");
  ApiResponse forwarded;
  auto after = AppendUndriven(r, *meta, {audit, ev}, true, &forwarded);
  if (!after.ok()) {
    if (forwarded.status != 200 || !forwarded.body.empty()) return forwarded;
    return FromStatus(after.status());
  }
  recorded();
  return SessionResponse(202, *after);
}

ApiResponse ApiHandler::Close(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto meta = OwnedSession(id, caller.tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  if (IsTerminal(meta->status())) {
    return Error(409, "conflict", "session " + id + " is already " + store::SessionStatusName(meta->status()));
  }
  v1::Event audit = AuditEvent(r, caller, "close", "");
  auto recorded = [&] {
    Status s = RecordAccess(id, audit);
    if (!s.ok()) spdlog::warn("session {}: closed, but not recorded in the tenant audit log: {}", id, s.message());
  };
  // Its driver here appends the close and ends the session (now if it waits for input,
  // at the end of the turn if it runs).
  if (control_->DeliverClose(id, audit)) {
    recorded();
    return SessionResponse(202, *meta);
  }
  // Nobody drives it here: a session waiting for input completes with this append; one
  // that is queued or running (its driver gone) gets the close and a wake, and completes
  // at the end of its turn. A harness that drives it gets the request (AppendUndriven).
  std::vector<v1::Event> events{audit};
  bool waiting = meta->status() == v1::SESSION_STATUS_WAITING_FOR_INPUT;
  if (waiting) {
    // Ended by a driver instead (the close is recorded and the session woken): one that
    // kept its sandbox (paused while it waits), which the driver destroys, and one with a
    // message logged since it began to wait whose wake was lost to a crash: the message
    // was acknowledged, so it gets its turn before the close ends the session.
    auto log = ReadEvents(id, meta->next_seq() - 1);
    if (!log.ok()) return FromStatus(log.status());
    const LogState state = ReadLogState(*log);
    if (!state.sandbox_id.empty() || state.last_user > state.last_status_change) waiting = false;
  }
  if (waiting) {
    v1::Event ev;
    ev.mutable_status_change()->set_to(v1::SESSION_STATUS_COMPLETED);
    ev.mutable_status_change()->set_reason("closed by the user");
    events.push_back(std::move(ev));
  }
  ApiResponse forwarded;
  auto after = AppendUndriven(r, *meta, std::move(events), true, &forwarded);
  if (!after.ok()) {
    if (forwarded.status != 200 || !forwarded.body.empty()) return forwarded;
    return FromStatus(after.status());  // already ended: 409
  }
  recorded();
  if (!waiting) control_->Wake(id);
  return SessionResponse(202, *after);
}

Status ApiHandler::RecordAccess(const std::string& id, const v1::Event& audit) {
  v1::AppendAuditRequest req;
  req.set_session_id(id);
  *req.mutable_audit() = audit.audit();
  return deps_.store->AppendAudit(req).status();
}

ApiResponse ApiHandler::ListAudit(const std::string& query, const std::string& tenant) {
  auto limit = QueryUint(query, "limit", 50, 1, 1000);
  if (!limit.ok()) return FromStatus(limit.status());
  const std::string page_token = QueryParam(query, "page_token");
  // Tokens are what this API issued (or a record id): hex.
  if (page_token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Error(400, "invalid_argument", "page_token is not one this API issued; repeat the request without it");
  }
  v1::ListAuditRequest req;
  req.set_tenant(tenant);
  req.set_page_size(static_cast<uint32_t>(*limit));
  req.set_page_token(page_token);
  auto resp = deps_.store->ListAudit(req);
  if (!resp.ok()) return FromStatus(resp.status());
  json::array records;
  for (const auto& rec : resp->records()) {
    const v1::Audit& a = rec.audit();
    records.push_back(json::object{{"id", rec.id()},
                                   {"session_id", rec.session_id()},
                                   {"action", a.action()},
                                   {"tenant", a.tenant()},
                                   {"key_id", a.key_id()},
                                   {"time_unix_ms", a.time_unix_ms()},
                                   {"remote_address", a.remote_address()},
                                   {"detail", a.detail()}});
  }
  ApiResponse out;
  out.body = json::serialize(
      json::object{{"records", std::move(records)}, {"next_page_token", resp->next_page_token()}});
  return out;
}

Result<std::vector<v1::Event>> ApiHandler::ReadEvents(const std::string& id, uint64_t to_seq) const {
  std::vector<v1::Event> events;
  uint64_t from = 1;
  while (from <= to_seq) {
    v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(from);
    req.set_to_seq(to_seq);
    req.set_limit(1000);
    SINEW_ASSIGN_OR_RETURN(v1::GetEventsResponse resp, deps_.store->GetEvents(req));
    if (resp.events_size() == 0) break;
    for (auto& ev : *resp.mutable_events()) events.push_back(std::move(ev));
    from = events.back().seq() + 1;
  }
  return events;
}

ApiResponse ApiHandler::Export(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto meta = OwnedSession(id, caller.tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  // The log as it is now. An export is a read: it leaves the session's log as it was.
  const uint64_t last = meta->next_seq() - 1;
  auto events = ReadEvents(id, last);
  if (!events.ok()) return FromStatus(events.status());
  std::string body;
  for (const auto& ev : *events) body += ProtoJsonLine(ev) + "\n";
  // No audit, no export: the tenant's audit log has the record before the events leave.
  Status audited = RecordAccess(id, AuditEvent(r, caller, "export", "events 1-" + std::to_string(last)));
  if (!audited.ok()) return FromStatus(audited);
  ApiResponse out;
  out.content_type = "application/x-ndjson";
  out.body = std::move(body);
  return out;
}

}  // namespace sinew::harness
