// ApiHandler: the REST API of docs/harness-openapi.yaml as a function from request to
// response (the event stream aside, which writes as it goes). No I/O of its own apart
// from the store and, for forwarded requests, the harness that drives a session.
//
// Thread-safety: Handle and Stream may be called from many threads at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json.hpp>

#include "harness_deps.h"

namespace sinew::harness {

struct ApiRequest {
  std::string method;
  std::string target;  // path and query
  std::string authorization;
  std::string content_type;
  std::string last_event_id;
  std::string accept;  // the Accept header ("" when none)
  std::string traceparent;  // the caller's W3C trace context ("" when none)
  bool forwarded = false;  // came from another harness (never forwarded again)
  std::string remote_address;  // the client's "ip:port" ("" when unknown)
  std::string body;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
  std::string created_session;  // the session this request created ("" for none); not sent
  // When set, the answer is an event stream instead of `body`: the server starts a 200
  // text/event-stream response (with `headers`) and calls `events` on the request's
  // thread, which may block; `send(event, data)` writes one event (`data`: one line of
  // JSON), waiting while the client reads slowly, and returns false once the client has
  // gone (events then still runs to its end). The stream ends when `events` returns.
  using EventSender = std::function<bool(const std::string& event, const std::string& data)>;
  std::function<void(const EventSender& send)> events;
};

// What the handler needs from the harness process around it.
class SessionControl {
 public:
  virtual ~SessionControl() = default;
  virtual void Wake(const std::string& session_id) = 0;
  // Hand input to this process's driver of the session; false when none drives it here.
  virtual bool DeliverMessage(const std::string& session_id, const std::string& text) = 0;
  // Cancels through this process's driver, which appends `audit` first; false when none
  // drives it here.
  virtual bool DeliverCancel(const std::string& session_id, const std::string& reason, const v1::Event& audit) = 0;
  // Closes a session with keep_open through this process's driver, which appends `audit`
  // (action "close"); false when none drives it here.
  virtual bool DeliverClose(const std::string& session_id, const v1::Event& audit) = 0;
  // Tells this process's driver of the session that the interrupt event at `seq` is in its
  // log (docs/harness.md, "Interrupts"): it cuts what is under way; false when none
  // drives it here.
  virtual bool DeliverInterrupt(const std::string& session_id, uint64_t seq) {
    (void)session_id;
    (void)seq;
    return false;
  }
  [[nodiscard]] virtual Status Ready() = 0;
  virtual std::string SessionsByStatusMetrics() = 0;
};

// The routes under /v1/sandboxes (api_sandboxes.h) as a function of an authenticated
// request, its path split at '/' and its query string. `deps` as for ApiHandler.
using SandboxRoutes = std::function<ApiResponse(const ApiRequest&, const Caller&, const std::vector<std::string>& parts,
                                                const std::string& query)>;
SandboxRoutes MakeSandboxRoutes(const HarnessDeps* deps);
// The routes under /v1/webhooks (api_webhooks.cc; docs/harness.md, "Webhooks").
using WebhookRoutes =
    std::function<ApiResponse(const ApiRequest&, const Caller&, const std::vector<std::string>& parts)>;
WebhookRoutes MakeWebhookRoutes(const HarnessDeps* deps);

class ApiHandler {
 public:
  // `deps` is not owned and outlives the handler; its owner field may be set after
  // construction, before the first request that needs it.
  ApiHandler(const HarnessDeps* deps, SessionControl* control)
      : deps_(*deps),
        control_(control),
        sandbox_routes_(MakeSandboxRoutes(deps)),
        webhook_routes_(MakeWebhookRoutes(deps)) {}

  ApiResponse Handle(const ApiRequest& request);

  // Creates the session of tick `tick_unix_ms` of schedule `schedule_id` of `tenant` under
  // the id `session_id`, from `task_json` (a POST /v1/sessions body), as POST
  // /v1/sessions would (the tenant's quotas included), its metadata naming the schedule
  // and the tick (docs/harness.md, "Schedules"). Errors: kAlreadyExists when the id is
  // taken; kInvalidArgument when the template is not valid (now); kResourceExhausted when
  // a quota refuses it; the store's otherwise.
  [[nodiscard]] Result<v1::Session> CreateTickSession(const std::string& tenant, const std::string& task_json,
                                                      const std::string& schedule_id, int64_t tick_unix_ms,
                                                      const std::string& session_id);

  // True when `request` asks for the event stream (GET .../events/stream).
  static bool IsStream(const ApiRequest& request);
  // The session a request's path names (/v1/sessions/{id}[/...]); "" for none.
  static std::string SessionIdOf(const ApiRequest& request);
  // The event stream, in the pieces its server (http_server.cc) waits between without
  // holding a thread. OpenStream authenticates, checks the session and watches it from the
  // client's resume point (blocking store calls): `response` is an error to send as is, or
  // a 200 to answer with stream headers; then, unless `watcher` is null (a finished
  // session with nothing after that point), every event the watcher yields goes out as
  // StreamChunk(event) until StreamEndsAfter(session_id, event) or the client leaves.
  struct StreamOpening {
    ApiResponse response;
    std::unique_ptr<store::EventWatcher> watcher;
    std::string session_id;
  };
  StreamOpening OpenStream(const ApiRequest& request);
  static std::string StreamChunk(const v1::Event& event);
  // True for a terminal status change or an audit event: the only events after which a
  // stream may end.
  static bool MayEndStream(const v1::Event& event);
  // True when the stream is complete after `event`: the last event of the log, and either
  // a terminal status change or an audit event while the session's status is terminal (a
  // log written before exports were recorded in the tenant audit log) (a store call when
  // MayEndStream(event)).
  bool StreamEndsAfter(const std::string& session_id, const v1::Event& event);
  // True once the harness is stopping: streams end.
  bool stopping() const { return deps_.stopping->load(); }

  static ApiResponse Error(int http_status, const std::string& code, const std::string& message);
  static ApiResponse FromStatus(const Status& status);

 private:
  // Routing helpers (api_handler.cc).
  Result<Caller> Authenticate(const ApiRequest& request) const;
  // The requests_per_second check: a 429 when the tenant's bucket is empty.
  std::optional<ApiResponse> RateLimit(const std::string& tenant);
  // Admission of `adding` more sessions of `tenant` (create, fork, import): a 429 when the
  // tenant would pass max_concurrent_sessions or (when `uses_model`) is over
  // tokens_per_minute. Holds *lock (the tenant's admission lock) on success, to be kept
  // until the sessions exist.
  std::optional<ApiResponse> AdmitSession(const std::string& tenant, bool uses_model,
                                          std::unique_lock<std::mutex>* lock, uint32_t adding = 1);
  // The session, if it exists and belongs to `tenant` (404 otherwise).
  Result<v1::Session> OwnedSession(const std::string& id, const std::string& tenant) const;
  // Events 1..to_seq of session `id`, read a page at a time (export, fork).
  Result<std::vector<v1::Event>> ReadEvents(const std::string& id, uint64_t to_seq) const;

  // The store request that creates a session of `tenant` from `task_body` (a POST
  // /v1/sessions body): validated, the tenant's approvals applied, secrets redacted.
  Result<v1::CreateSessionRequest> NewSessionRequest(std::string_view task_body, const std::string& tenant) const;

  // Endpoints (api_sessions.cc).
  ApiResponse CreateSession(const ApiRequest& r, const std::string& tenant);
  ApiResponse ListSessions(const std::string& query, const std::string& tenant);
  ApiResponse GetSession(const std::string& id, const std::string& tenant);
  ApiResponse GetEvents(const std::string& id, const std::string& query, const std::string& tenant);
  ApiResponse PostMessage(const ApiRequest& r, const std::string& id, const std::string& tenant);
  ApiResponse Cancel(const ApiRequest& r, const std::string& id, const Caller& caller);
  // POST /v1/sessions/{id}/close: a session with keep_open completes (docs/harness.md,
  // "Conversations that stay open"); 409 when it already ended.
  ApiResponse Close(const ApiRequest& r, const std::string& id, const Caller& caller);
  // POST /v1/sessions/{id}/decisions: answers pending tool approvals (docs/harness.md,
  // "Tool approvals"); each decision is an approval_decided event, appended once.
  ApiResponse Decide(const ApiRequest& r, const std::string& id, const Caller& caller);
  // POST /v1/sessions/{id}/interrupt (api_interrupt.cc; docs/harness.md, "Interrupts"):
  // an interrupt event appended to the log, then its driver told; 409 when it has ended.
  ApiResponse Interrupt(const ApiRequest& r, const std::string& id, const Caller& caller);
  // The session's JSON, with "pending_approvals" when it requires action (a read of its log).
  Result<boost::json::object> SessionJsonWithApprovals(const v1::Session& meta) const;
  ApiResponse Fork(const ApiRequest& r, const std::string& id, const Caller& caller);
  ApiResponse Import(const ApiRequest& r, const Caller& caller);
  ApiResponse Export(const ApiRequest& r, const std::string& id, const Caller& caller);
  // Writes `audit` (an audit event) about session `id` to its tenant's audit log in the
  // store (docs/security.md, "Audit log"); the session's own log is not touched.
  Status RecordAccess(const std::string& id, const v1::Event& audit);
  // GET /v1/audit: the caller's tenant's audit log, oldest first, a page at a time.
  ApiResponse ListAudit(const std::string& query, const std::string& tenant);
  // Appends `events` to session `known` (as the caller read it), which nobody drives here,
  // under a short lease of our own (an imported session no harness ever leased takes
  // events other than a user_message under no lease: it stays a record); when another
  // harness drives it, forwards `r` there.
  // Sets *forwarded to the answer to send: the forwarded one, or a 503 with Retry-After
  // when the driving harness does not answer or took the session over meanwhile.
  // kFailedPrecondition when `reject_terminal` and the session has ended.
  Result<v1::Session> AppendUndriven(const ApiRequest& r, const v1::Session& known,
                                     std::vector<v1::Event> events, bool reject_terminal,
                                     ApiResponse* forwarded);

  // /v1/schedules (api_schedules.cc; docs/harness.md, "Schedules").
  ApiResponse ScheduleRoutes(const ApiRequest& r, const Caller& caller, const std::vector<std::string>& parts,
                             const std::string& query);
  ApiResponse CreateSchedule(const ApiRequest& r, const std::string& tenant);
  ApiResponse ListSchedules(const std::string& query, const std::string& tenant);
  // Moves schedule `id` of `tenant` to `state` ("active", "paused", "deleted") under its
  // lease; a 409 for a move its state does not allow.
  ApiResponse ChangeSchedule(const std::string& id, const std::string& tenant, const std::string& state);

  const HarnessDeps& deps_;
  SessionControl* control_;  // not owned
  const SandboxRoutes sandbox_routes_;
  const WebhookRoutes webhook_routes_;
  std::mutex admission_mutex_;
  std::map<std::string, std::unique_ptr<std::mutex>> admission_;  // per tenant; guarded by admission_mutex_
};

// An audit event (docs/security.md, "Audit events") for `action` by `caller`, now.
v1::Event AuditEvent(const ApiRequest& r, const Caller& caller, const std::string& action, const std::string& detail);

// Query helpers: the value of `key` in a query string ("" when absent), percent-decoded.
std::string QueryParam(const std::string& query, const std::string& key, bool* present = nullptr);
// A number of a query string or header, strictly: one or more ASCII decimal digits and
// nothing else (no sign, space, NUL or other byte after a percent-decoding), at most `max`.
// nullopt otherwise, past uint64 included.
std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t max);
// The largest `after` / Last-Event-ID accepted (past the end is fine: nothing follows).
inline constexpr uint64_t kMaxResumeSeq = UINT64_MAX / 2;
// True for a well-formed session id: 32 lower-case hex digits.
bool IsSessionId(std::string_view id);

}  // namespace sinew::harness
