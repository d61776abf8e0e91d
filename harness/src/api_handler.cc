// ApiHandler: routing, authentication, errors, health, metrics and the event stream.
#include "api_handler.h"

#include <charconv>
#include <cstdio>

#include <chrono>

#include "json_util.h"
#include "sinew/proto_json.h"
#include "sinew/http/url.h"
#include "sinew/utf8.h"
#include "ui_assets.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

}  // namespace

bool IsSessionId(std::string_view id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > pos) parts.emplace_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return parts;
}

ApiResponse Json(int status, const json::object& body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

}  // namespace

std::string QueryParam(const std::string& query, const std::string& key, bool* present) {
  if (present != nullptr) *present = false;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string_view pair(query.data() + pos, amp - pos);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      if (present != nullptr) *present = true;
      if (eq == std::string_view::npos) return "";
      std::string raw(pair.substr(eq + 1));
      for (auto& c : raw) {
        if (c == '+') c = ' ';
      }
      return http::PercentDecode(raw);
    }
    pos = amp + 1;
  }
  return "";
}

std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  // from_chars takes digits only (no sign, no space); the whole text must be them.
  auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
  if (text.empty() || ec != std::errc() || ptr != end || v > max) return std::nullopt;
  return v;
}

ApiResponse ApiHandler::Error(int http_status, const std::string& code, const std::string& message) {
  // Messages quote the request (paths, ids, fields), which may not be UTF-8; JSON must be
  // (harness_request_fuzz found a 404 whose body did not parse).
  return Json(http_status, json::object{{"error", json::object{{"code", code}, {"message", SanitizeUtf8(message)}}}});
}

ApiResponse ApiHandler::FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return Error(400, "invalid_argument", s.message());
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied:
      return Error(404, "not_found", s.message());
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return Error(409, "conflict", s.message());
    case StatusCode::kUnauthenticated:
      return Error(401, "unauthenticated", s.message());
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return Error(503, "unavailable", s.message());
    default:
      return Error(500, "internal", s.message());
  }
}

Result<Caller> ApiHandler::Authenticate(const ApiRequest& r) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (r.authorization.empty()) {
    return Status::Unauthenticated("missing Authorization header; send 'Authorization: Bearer <api key>'");
  }
  if (r.authorization.compare(0, kBearer.size(), kBearer) != 0) {
    return Status::Unauthenticated("Authorization must be 'Bearer <api key>'");
  }
  auto caller = deps_.api_keys->Match(std::string_view(r.authorization).substr(kBearer.size()));
  if (!caller) return Status::Unauthenticated("unknown API key");
  return *caller;
}

namespace {

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

ApiResponse TooMany(const std::string& code, const std::string& message, uint32_t retry_after) {
  ApiResponse out = ApiHandler::Error(429, code, message + "; retry in " + std::to_string(retry_after) + " s");
  out.headers.emplace_back("Retry-After", std::to_string(retry_after));
  return out;
}

// How long a client refused for max_concurrent_sessions is asked to wait: nothing says
// when one of its sessions ends, so this is a hint.
constexpr uint32_t kSessionsRetryAfterSeconds = 5;

}  // namespace

std::optional<ApiResponse> ApiHandler::RateLimit(const std::string& tenant) {
  auto retry = deps_.quotas->TakeRequest(tenant);
  if (!retry) return std::nullopt;
  deps_.metrics->Add("sinew_harness_quota_refusals_total", "quota=\"requests_per_second\"");
  return TooMany("rate_limited",
                 "tenant '" + tenant + "' is over its requests_per_second (" +
                     FormatNumber(deps_.quotas->QuotaOf(tenant).requests_per_second) + ")",
                 *retry);
}

std::optional<ApiResponse> ApiHandler::AdmitSession(const std::string& tenant, bool uses_model,
                                                    std::unique_lock<std::mutex>* lock, uint32_t adding) {
  const TenantQuotaConfig& quota = deps_.quotas->QuotaOf(tenant);
  if (uses_model) {
    if (auto retry = deps_.quotas->TokensRetryAfter(tenant)) {
      deps_.metrics->Add("sinew_harness_quota_refusals_total", "quota=\"tokens_per_minute\"");
      return TooMany("rate_limited",
                     "tenant '" + tenant + "' used " + std::to_string(deps_.quotas->TokensInLastMinute(tenant)) +
                         " model tokens in the last minute (tokens_per_minute " +
                         std::to_string(quota.tokens_per_minute) + ")",
                     *retry);
    }
  }
  if (quota.max_concurrent_sessions == 0) return std::nullopt;
  {
    std::lock_guard<std::mutex> guard(admission_mutex_);
    auto& m = admission_[tenant];
    if (!m) m = std::make_unique<std::mutex>();
    *lock = std::unique_lock<std::mutex>(*m);
  }
  // Queued and running sessions in the store (imported records that nobody drives are
  // not work). The lock makes check-and-create atomic within this harness only.
  uint64_t count = 0;
  for (auto status : {v1::SESSION_STATUS_QUEUED, v1::SESSION_STATUS_RUNNING, v1::SESSION_STATUS_REQUIRES_ACTION}) {
    v1::ListSessionsRequest req;
    req.set_tenant(tenant);
    req.set_status(status);
    req.set_page_size(1000);
    while (count < quota.max_concurrent_sessions) {
      auto resp = deps_.store->ListSessions(req);
      if (!resp.ok()) {
        lock->unlock();
        return FromStatus(resp.status());
      }
      for (const auto& s : resp->sessions()) {
        if (!(s.imported() && s.lease_epoch() == 0)) ++count;
      }
      if (resp->next_page_token().empty()) break;
      req.set_page_token(resp->next_page_token());
    }
  }
  if (count + adding <= quota.max_concurrent_sessions) return std::nullopt;
  lock->unlock();
  deps_.metrics->Add("sinew_harness_quota_refusals_total", "quota=\"max_concurrent_sessions\"");
  return TooMany("quota_exceeded",
                 "tenant '" + tenant + "' has " + std::to_string(count) + " queued or running sessions (max_concurrent_sessions " +
                     std::to_string(quota.max_concurrent_sessions) + ")" +
                     (adding > 1 ? "; " + std::to_string(adding) + " more were asked for" : ""),
                 kSessionsRetryAfterSeconds);
}

v1::Event AuditEvent(const ApiRequest& r, const Caller& caller, const std::string& action, const std::string& detail) {
  v1::Event ev;
  auto* a = ev.mutable_audit();
  a->set_action(action);
  a->set_tenant(caller.tenant);
  a->set_key_id(caller.key_id);
  a->set_time_unix_ms(NowUnixMs());
  a->set_remote_address(SanitizeUtf8(r.remote_address));
  a->set_detail(detail);
  return ev;
}

Result<v1::Session> ApiHandler::OwnedSession(const std::string& id, const std::string& tenant) const {
  if (!IsSessionId(id)) return Status::NotFound("no session '" + id + "' (ids are 32 lower-case hex digits)");
  auto meta = deps_.store->GetSession(id);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) return Status::NotFound("no session " + id);
    return meta.status();
  }
  // Another tenant's session is indistinguishable from a missing one.
  if (meta->tenant() != tenant) return Status::NotFound("no session " + id);
  return meta;
}

bool ApiHandler::IsStream(const ApiRequest& r) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  auto parts = SplitPath(path);
  return r.method == "GET" && parts.size() == 5 && parts[0] == "v1" && parts[1] == "sessions" &&
         parts[3] == "events" && parts[4] == "stream";
}

std::string ApiHandler::SessionIdOf(const ApiRequest& r) {
  auto parts = SplitPath(r.target.substr(0, r.target.find('?')));
  if (parts.size() < 3 || parts[0] != "v1" || parts[1] != "sessions") return "";
  if (parts.size() == 3 && parts[2] == "import") return "";
  return parts[2];
}

ApiResponse ApiHandler::Handle(const ApiRequest& r) {
  const size_t q = r.target.find('?');
  const std::string path = r.target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : r.target.substr(q + 1);
  auto parts = SplitPath(path);
  auto only = [&](const char* method) -> std::optional<ApiResponse> {
    if (r.method == method) return std::nullopt;
    return Error(405, "method_not_allowed", r.method + " is not allowed on " + path + "; use " + method);
  };
  if (IsUiPath(path)) return ServeUi(r);  // the web console: files only, no key needed
  if (path == "/healthz") {
    if (auto e = only("GET")) return *e;
    return Json(200, json::object{{"status", "ok"}});
  }
  if (path == "/readyz") {
    if (auto e = only("GET")) return *e;
    Status ready = control_->Ready();
    if (!ready.ok()) return Error(503, "unavailable", ready.message());
    return Json(200, json::object{{"status", "ready"}});
  }
  if (path == "/metrics") {
    if (auto e = only("GET")) return *e;
    ApiResponse m;
    m.content_type = "text/plain; version=0.0.4";
    m.body = deps_.metrics->Render(control_->SessionsByStatusMetrics());
    return m;
  }
  if (parts.size() < 2 || parts[0] != "v1" ||
      (parts[1] != "sessions" && parts[1] != "audit" && parts[1] != "sandboxes" && parts[1] != "webhooks" &&
       parts[1] != "schedules")) {
    return Error(404, "not_found", "no such endpoint: " + path);
  }
  auto caller = Authenticate(r);
  if (!caller.ok()) return FromStatus(caller.status());
  const std::string* tenant = &caller->tenant;
  if (auto limited = RateLimit(*tenant)) return *limited;
  if (parts[1] == "sandboxes") return sandbox_routes_(r, *caller, parts, query);
  if (parts[1] == "webhooks") return webhook_routes_(r, *caller, parts);
  if (parts[1] == "schedules") return ScheduleRoutes(r, *caller, parts, query);
  if (parts[1] == "audit") {
    if (parts.size() != 2) return Error(404, "not_found", "no such endpoint: " + path);
    if (auto e = only("GET")) return *e;
    return ListAudit(query, *tenant);
  }
  const bool has_body = r.method == "POST";
  auto needs_json = [&]() -> std::optional<ApiResponse> {
    if (r.content_type.rfind("application/json", 0) != 0) {
      return Error(415, "unsupported_media_type", "send the body as Content-Type: application/json");
    }
    return std::nullopt;
  };
  if (parts.size() == 2) {
    if (r.method == "POST") {
      if (auto e = needs_json()) return *e;
      return CreateSession(r, *tenant);
    }
    if (auto e = only("GET")) return Error(405, "method_not_allowed", "use GET or POST on /v1/sessions");
    return ListSessions(query, *tenant);
  }
  if (parts.size() == 3 && parts[2] == "import") {
    if (auto e = only("POST")) return *e;
    if (r.content_type.rfind("application/x-ndjson", 0) != 0) {
      return Error(415, "unsupported_media_type", "send the events as Content-Type: application/x-ndjson");
    }
    return Import(r, *caller);
  }
  const std::string& id = parts[2];
  if (parts.size() == 3) {
    if (auto e = only("GET")) return *e;
    return GetSession(id, *tenant);
  }
  if (parts.size() == 4 && parts[3] == "export") {
    if (auto e = only("GET")) return *e;
    return Export(r, id, *caller);
  }
  if (parts.size() == 4 && parts[3] == "events") {
    if (auto e = only("GET")) return *e;
    return GetEvents(id, query, *tenant);
  }
  if (parts.size() == 4 && (parts[3] == "messages" || parts[3] == "cancel" || parts[3] == "fork" ||
                            parts[3] == "decisions" || parts[3] == "close" || parts[3] == "interrupt")) {
    if (auto e = only("POST")) return *e;
    if (parts[3] == "cancel") return Cancel(r, id, *caller);
    if (parts[3] == "close") return Close(r, id, *caller);
    if (auto e = needs_json(); e && has_body) return *e;
    if (parts[3] == "messages") return PostMessage(r, id, *tenant);
    if (parts[3] == "decisions") return Decide(r, id, *caller);
    if (parts[3] == "interrupt") return Interrupt(r, id, *caller);
    return Fork(r, id, *caller);
  }
  if (parts.size() == 5 && parts[3] == "events" && parts[4] == "stream") {
    return Error(405, "method_not_allowed", "use GET on the event stream");
  }
  return Error(404, "not_found", "no such endpoint: " + path);
}

ApiHandler::StreamOpening ApiHandler::OpenStream(const ApiRequest& r) {
  StreamOpening out;
  auto caller = Authenticate(r);
  if (!caller.ok()) return {FromStatus(caller.status()), nullptr, ""};
  if (auto limited = RateLimit(caller->tenant)) return {*limited, nullptr, ""};
  const std::string* tenant = &caller->tenant;
  const size_t q = r.target.find('?');
  const std::string query = q == std::string::npos ? "" : r.target.substr(q + 1);
  const std::string id = SplitPath(r.target.substr(0, q))[2];
  auto meta = OwnedSession(id, *tenant);
  if (!meta.ok()) return {FromStatus(meta.status()), nullptr, ""};
  std::string after_text = r.last_event_id;
  bool has_after = false;
  std::string from_query = QueryParam(query, "after", &has_after);
  if (after_text.empty() && has_after) after_text = from_query;
  uint64_t after = 0;
  if (!r.last_event_id.empty() || has_after) {
    // The same rule as GET /events?after= (an overflowing value once wrapped to 0 and
    // replayed the whole session; "5%00" was read as 5).
    auto parsed = ParseDecimal(after_text, kMaxResumeSeq);
    if (!parsed) {
      const std::string what = r.last_event_id.empty() ? "query parameter after" : "header Last-Event-ID";
      return {Error(400, "invalid_argument",
                    what + " must be an integer in [0, " + std::to_string(kMaxResumeSeq) + "]"),
              nullptr, ""};
    }
    after = *parsed;
  }
  out.response.content_type = "text/event-stream";
  // A finished session with nothing after the client's point: the stream is complete.
  if (after + 1 >= meta->next_seq() && IsTerminal(meta->status())) return out;
  auto watcher = deps_.store->Watch(id, after + 1);
  if (!watcher.ok()) return {FromStatus(watcher.status()), nullptr, ""};
  out.watcher = std::move(watcher).value();
  out.session_id = id;
  return out;
}

std::string ApiHandler::StreamChunk(const v1::Event& ev) {
  return "id: " + std::to_string(ev.seq()) + "\nevent: " + ev.type() + "\ndata: " + ProtoJsonLine(ev) + "\n\n";
}

bool ApiHandler::MayEndStream(const v1::Event& ev) {
  return (ev.has_status_change() && IsTerminal(ev.status_change().to())) || ev.has_audit();
}

bool ApiHandler::StreamEndsAfter(const std::string& id, const v1::Event& ev) {
  if (!MayEndStream(ev)) return false;
  // The end, unless the session went on after this (a later message woke it). An audit
  // event ends it only after the end (a log from before exports were recorded in the
  // tenant audit log has one after its last status change).
  auto now = deps_.store->GetSession(id);
  return now.ok() && now->next_seq() == ev.seq() + 1 && (ev.has_status_change() || IsTerminal(now->status()));
}

}  // namespace sinew::harness
