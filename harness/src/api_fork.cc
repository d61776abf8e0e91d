// ApiHandler: fork and import (sessions made from other sessions' events).
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "api_handler.h"
#include "json_util.h"
#include "log_state.h"
#include "task_spec.h"
#include "sinew/json_fields.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
constexpr uint64_t kMaxForks = 16;  // sessions one fork request makes (best-of-n)
using json_fields::ParseObject;
using json_fields::ReadString;
using json_fields::ReadUint;
using json_fields::RejectUnknownKeys;

ApiResponse Created(const v1::Session& s) {
  ApiResponse r;
  r.status = 201;
  r.body = json::serialize(json::object{{"session", SessionToJson(s)}});
  return r;
}

// Appends `events` (each with its seq set, or 0) in batches of at most 1000.
Status AppendAll(store::SessionStore* store, const std::string& id, uint64_t next_seq,
                 std::vector<v1::Event>& events) {
  for (size_t start = 0; start < events.size(); start += 1000) {
    v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(next_seq);
    const size_t end = std::min(events.size(), start + 1000);
    for (size_t i = start; i < end; ++i) *req.add_events() = events[i];
    SINEW_ASSIGN_OR_RETURN(v1::AppendResponse resp, store->Append(req));
    next_seq = resp.last_seq() + 1;
  }
  return Status::Ok();
}

// The sandbox a fork at `at_seq` starts from (docs/harness.md, "Forks with their sandbox"):
// the source's live sandbox at that point, and its newest kept snapshot taken at or before
// it (none when the source kept none of that sandbox).
struct ForkSandbox {
  std::string source_sandbox;  // live at at_seq; "" when the source had none then
  std::string snapshot_id;     // "" when none applies: the fork's first sandbox call gets a fresh one
  std::string host_address;
  uint64_t snapshot_at_seq = 0;
  uint32_t calls_after = 0;  // calls that may have changed the sandbox between the snapshot and at_seq
};

ForkSandbox ChooseForkSandbox(const std::vector<v1::Event>& all, uint64_t at_seq) {
  ForkSandbox out;
  // The log read once: the state at at_seq names the live sandbox; the whole log's the
  // snapshots still kept (one logged after at_seq may show the sandbox at at_seq, and one
  // dropped later is gone).
  LogState whole;
  for (size_t i = 0; i < all.size(); ++i) {
    ApplyEvent(all[i], static_cast<int>(i), &whole);
    if (i + 1 == at_seq) out.source_sandbox = whole.sandbox_id;
  }
  if (out.source_sandbox.empty()) return out;
  const v1::SandboxSnapshot* best = nullptr;
  for (const auto& ev : all) {
    if (!ev.has_sandbox_snapshot()) continue;
    const auto& snap = ev.sandbox_snapshot();
    if (snap.sandbox_id() != out.source_sandbox || snap.at_seq() > at_seq) continue;
    const bool kept = std::any_of(whole.snapshots.begin(), whole.snapshots.end(),
                                  [&](const LogState::Snapshot& k) { return k.id == snap.snapshot_id(); });
    if (kept && (best == nullptr || snap.at_seq() >= best->at_seq())) best = &snap;
  }
  if (best == nullptr) return out;
  out.snapshot_id = best->snapshot_id();
  out.host_address = best->host_address();
  out.snapshot_at_seq = best->at_seq();
  std::set<std::string> changing;
  for (const auto& ev : all) {
    if (ev.seq() <= out.snapshot_at_seq) continue;
    if (ev.seq() > at_seq) break;
    if (ev.has_tool_call() && ev.tool_call().sandbox_id() == out.source_sandbox && !ev.tool_call().idempotent()) {
      changing.insert(ev.tool_call().call_id());
    }
    if (ev.has_tool_result() && changing.count(ev.tool_result().call_id()) != 0) ++out.calls_after;
  }
  return out;
}

json::value ForkSandboxJson(const ForkSandbox& f) {
  if (f.source_sandbox.empty()) return nullptr;
  json::object o{{"source_sandbox_id", f.source_sandbox}};
  if (f.snapshot_id.empty()) {
    o["from_snapshot"] = nullptr;
  } else {
    o["from_snapshot"] = f.snapshot_id;
    o["snapshot_at_seq"] = f.snapshot_at_seq;
    o["calls_after_snapshot"] = f.calls_after;
  }
  return o;
}

}  // namespace

ApiResponse ApiHandler::Fork(const ApiRequest& r, const std::string& id, const Caller& caller) {
  const std::string& tenant = caller.tenant;
  auto meta = OwnedSession(id, tenant);
  if (!meta.ok()) return FromStatus(meta.status());
  auto body = ParseObject(r.body, "request body");
  if (!body.ok()) return FromStatus(body.status());
  Status s = RejectUnknownKeys(*body, "at_seq,model,message,n", "body");
  uint64_t at_seq = 0, n = 1;
  std::string model, message;
  if (s.ok()) s = ReadUint(*body, "at_seq", "body", UINT64_MAX / 2, &at_seq);
  if (s.ok()) s = ReadString(*body, "model", "body", &model);
  if (s.ok()) s = ReadString(*body, "message", "body", &message);
  if (s.ok()) s = ReadUint(*body, "n", "body", kMaxForks, &n);
  if (!s.ok()) return FromStatus(s);
  if (at_seq < 1 || at_seq >= meta->next_seq()) {
    return Error(400, "invalid_argument", "body.at_seq is required and must be in [1, " +
                                              std::to_string(meta->next_seq() - 1) + "]");
  }
  if (n < 1) return Error(400, "invalid_argument", "body.n must be in [1, " + std::to_string(kMaxForks) + "]");
  if (!model.empty() && !deps_.config->models.count(model)) {
    return Error(400, "invalid_argument", "body.model '" + model + "' is not configured");
  }
  auto read = ReadEvents(id, meta->next_seq() - 1);
  if (!read.ok()) return FromStatus(read.status());
  const std::vector<v1::Event> all = std::move(read).value();
  if (all.empty() || !all.front().has_session_created()) {
    return Error(500, "internal", "session " + id + " does not start with session_created");
  }
  const ForkSandbox sandbox = ChooseForkSandbox(all, at_seq);
  const v1::SessionCreated& created = all.front().session_created();
  std::string task_json = created.task_json();
  if (!model.empty()) {
    auto task = ParseObject(task_json, "task_json");
    if (task.ok()) {
      (*task)["model"] = model;
      task_json = json::serialize(*task);
    }
  }
  const std::string point = "forked from " + id + " at seq " + std::to_string(at_seq);
  std::vector<v1::Event> copies;
  for (size_t i = 1; i < all.size() && all[i].seq() <= at_seq; ++i) {
    // A close asked of the source ends the source's conversation, not the fork's; the
    // source's snapshots stay the source's (it deletes them as it takes newer ones).
    if (all[i].has_audit() && all[i].audit().action() == "close") continue;
    if (all[i].has_sandbox_snapshot()) continue;
    v1::Event ev = all[i];
    ev.clear_seq();
    ev.clear_session_id();
    copies.push_back(std::move(ev));
  }
  if (!sandbox.source_sandbox.empty()) {
    // The source's sandbox stays with the source; the fork's first sandbox call starts its
    // own from the snapshot (or a fresh one when none applies).
    v1::Event released;
    auto* rel = released.mutable_sandbox_released();
    rel->set_sandbox_id(sandbox.source_sandbox);
    rel->set_next_from_snapshot(sandbox.snapshot_id);
    rel->set_snapshot_host_address(sandbox.host_address);
    rel->set_reason(point + ": the sandbox stays with the source; " +
                    (sandbox.snapshot_id.empty()
                         ? std::string("no snapshot of it was kept at or before this point, so the next sandbox is fresh")
                         : "the next sandbox starts from its snapshot " + sandbox.snapshot_id + " (at seq " +
                               std::to_string(sandbox.snapshot_at_seq) + ", " + std::to_string(sandbox.calls_after) +
                               " sandbox calls after it)"));
    copies.push_back(std::move(released));
  }
  v1::Event queued;
  queued.mutable_status_change()->set_from(v1::SESSION_STATUS_UNSPECIFIED);
  queued.mutable_status_change()->set_to(v1::SESSION_STATUS_QUEUED);
  queued.mutable_status_change()->set_reason(point);
  copies.push_back(std::move(queued));
  if (!message.empty()) {
    v1::Event ev;
    ev.mutable_user_message()->set_text(deps_.vault->Redact(message));
    copies.push_back(std::move(ev));
  }
  const std::string detail = point + (n > 1 ? " (one of " + std::to_string(n) + ")" : "") +
                             (sandbox.snapshot_id.empty() ? "" : " with sandbox snapshot " + sandbox.snapshot_id);
  copies.push_back(AuditEvent(r, caller, "fork", detail));
  std::unique_lock<std::mutex> admission;
  if (auto refused = AdmitSession(tenant, true, &admission, static_cast<uint32_t>(n))) return *refused;
  std::vector<v1::Session> forks;
  for (uint64_t k = 0; k < n; ++k) {
    v1::CreateSessionRequest req;
    req.set_tenant(tenant);
    req.set_title(created.title());
    *req.mutable_metadata() = created.metadata();
    req.set_task_json(task_json);
    req.set_forked_from_session(id);
    req.set_forked_at_seq(at_seq);
    auto fork = deps_.store->CreateSession(req);
    if (!fork.ok()) return FromStatus(fork.status());
    std::vector<v1::Event> events = copies;
    Status appended = AppendAll(deps_.store, fork->id(), 2, events);
    if (!appended.ok()) return FromStatus(appended);
    auto after = deps_.store->GetSession(fork->id());
    if (!after.ok()) return FromStatus(after.status());
    forks.push_back(std::move(after).value());
  }
  if (admission.owns_lock()) admission.unlock();
  std::string ids;
  for (const auto& f : forks) ids += (ids.empty() ? "" : ", ") + f.id();
  // The source's record of it, in the tenant's audit log (a fork reads the source and
  // leaves its log as it was). The forks' own logs already hold one, so a record that
  // cannot be written now (a store error) does not undo them; the log says why.
  Status audited = RecordAccess(id, AuditEvent(r, caller, "fork", "forked into " + ids + " at seq " +
                                                                      std::to_string(at_seq)));
  if (!audited.ok()) {
    spdlog::warn("session {}: forked into {} but not recorded in the tenant audit log: {}", id, ids,
                 audited.message());
  }
  json::array sessions;
  for (const auto& f : forks) {
    control_->Wake(f.id());
    sessions.push_back(SessionToJson(f));
  }
  ApiResponse out;
  out.status = 201;
  out.body = json::serialize(json::object{
      {"session", sessions.front()}, {"sessions", std::move(sessions)}, {"sandbox", ForkSandboxJson(sandbox)}});
  return out;
}

ApiResponse ApiHandler::Import(const ApiRequest& r, const Caller& caller) {
  const std::string& tenant = caller.tenant;
  std::vector<v1::Event> events;
  std::istringstream in(r.body);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    v1::Event ev;
    auto parsed = google::protobuf::util::JsonStringToMessage(line, &ev);
    if (!parsed.ok()) {
      return Error(400, "invalid_argument", "line " + std::to_string(line_no) +
                                                " is not an Event JSON: " + std::string(parsed.message()));
    }
    events.push_back(std::move(ev));
  }
  if (events.empty()) return Error(400, "invalid_argument", "the body holds no events");
  if (!events.front().has_session_created() || events.front().seq() != 1) {
    return Error(400, "invalid_argument", "event 1 must be a session_created event with seq 1");
  }
  const std::string id = events.front().session_id();
  if (!IsSessionId(id)) {
    return Error(400, "invalid_argument", "line 1: session_id '" + id + "' is not a session id (32 lower-case hex digits)");
  }
  if (auto task = ParseObject(events.front().session_created().task_json(), "session_created.task_json"); !task.ok()) {
    return Error(400, "invalid_argument", "line 1: " + task.status().message());
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq() != i + 1) {
      return Error(400, "invalid_argument", "line " + std::to_string(i + 1) + " has seq " +
                                                std::to_string(events[i].seq()) + "; seqs must run 1, 2, 3, ...");
    }
    if (events[i].session_id() != id) {
      return Error(400, "invalid_argument", "line " + std::to_string(i + 1) + " belongs to another session");
    }
  }
  const v1::SessionCreated& created = events.front().session_created();
  if (created.tenant() != tenant) {
    return Error(400, "invalid_argument", "the session belongs to tenant '" + created.tenant() +
                                              "'; import it with an API key of that tenant");
  }
  std::unique_lock<std::mutex> admission;
  if (auto refused = AdmitSession(tenant, false, &admission)) return *refused;
  v1::CreateSessionRequest req;
  req.set_tenant(created.tenant());
  req.set_title(created.title());
  *req.mutable_metadata() = created.metadata();
  req.set_task_json(created.task_json());
  req.set_forked_from_session(created.forked_from_session());
  req.set_forked_at_seq(created.forked_at_seq());
  req.set_parent_session_id(created.parent_session_id());
  req.set_parent_call_id(created.parent_call_id());
  req.set_session_id(id);
  req.set_created_unix_ms(events.front().timestamp_unix_ms());
  auto meta = deps_.store->CreateSession(req);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kAlreadyExists) {
      return Error(409, "conflict", "session " + id + " already exists in this store");
    }
    return FromStatus(meta.status());
  }
  // The log exactly as exported: the import's record goes to the tenant's audit log.
  std::vector<v1::Event> rest(events.begin() + 1, events.end());
  Status appended = AppendAll(deps_.store, id, 2, rest);
  if (!appended.ok()) return FromStatus(appended);
  auto after = deps_.store->GetSession(id);
  if (!after.ok()) return FromStatus(after.status());
  Status audited = RecordAccess(id, AuditEvent(r, caller, "import", "imported " + std::to_string(events.size()) +
                                                                        " events"));
  if (!audited.ok()) {
    spdlog::warn("session {}: imported but not recorded in the tenant audit log: {}", id, audited.message());
  }
  return Created(*after);
}

}  // namespace sinew::harness
