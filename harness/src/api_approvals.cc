// ApiHandler: tool approvals (docs/harness.md, "Tool approvals"). A decision is an
// approval_decided event that the API appends straight to the session's log, with the
// log's next seq as the condition of the append: of two decisions for one call made at
// once (on two harnesses), the store takes one and refuses the other, which reads the
// log again and finds the call decided (409). The driver of the session, wherever it
// runs, reads the decision from the log.
#include <spdlog/spdlog.h>

#include <chrono>
#include <set>
#include <thread>

#include "api_handler.h"
#include "json_util.h"
#include "log_state.h"
#include "sinew/json_fields.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadString;
using json_fields::RejectUnknownKeys;

constexpr size_t kMaxDecisions = 100;
constexpr size_t kMaxDecisionMessageBytes = 4096;

struct Decision {
  std::string call_id;
  bool approved = false;
  std::string message;
};

Result<std::vector<Decision>> ParseDecisions(const std::string& text) {
  SINEW_ASSIGN_OR_RETURN(json::object body, ParseObject(text, "request body"));
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(body, "decisions", "body"));
  const json::value* list = body.if_contains("decisions");
  if (list == nullptr || !list->is_array() || list->as_array().empty()) {
    return Status::InvalidArgument(
        "body.decisions is required: a non-empty array of {\"call_id\", \"decision\"}");
  }
  if (list->as_array().size() > kMaxDecisions) {
    return Status::InvalidArgument("body.decisions holds more than " +
                                   std::to_string(kMaxDecisions) + " decisions");
  }
  std::vector<Decision> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    const std::string w = "body.decisions[" + std::to_string(i) + "]";
    const json::value& v = list->as_array()[i];
    if (!v.is_object())
      return Status::InvalidArgument(w +
                                     " must be an object {\"call_id\", \"decision\", \"message\"}");
    const json::object& o = v.as_object();
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(o, "call_id,decision,message", w));
    Decision d;
    std::string decision;
    SINEW_RETURN_IF_ERROR(ReadString(o, "call_id", w, &d.call_id));
    SINEW_RETURN_IF_ERROR(ReadString(o, "decision", w, &decision));
    SINEW_RETURN_IF_ERROR(ReadString(o, "message", w, &d.message));
    if (d.call_id.empty())
      return Status::InvalidArgument(w + ".call_id is required (a non-empty string)");
    if (decision != "approve" && decision != "deny") {
      return Status::InvalidArgument(w + ".decision must be \"approve\" or \"deny\"");
    }
    if (d.message.size() > kMaxDecisionMessageBytes) {
      return Status::InvalidArgument(w + ".message is over " +
                                     std::to_string(kMaxDecisionMessageBytes) + " bytes");
    }
    if (!seen.insert(d.call_id).second) {
      return Status::InvalidArgument(w + ".call_id '" + d.call_id +
                                     "' is decided twice in this request");
    }
    d.approved = decision == "approve";
    out.push_back(std::move(d));
  }
  return out;
}

json::array PendingApprovalsJson(const std::vector<v1::Event>& log, const LogState& state) {
  json::array out;
  for (const auto& call_id : state.PendingApprovals()) {
    const v1::Event& ev = log[state.approval_requested.at(call_id)];
    const v1::ApprovalRequested& a = ev.approval_requested();
    out.push_back(json::object{{"call_id", a.call_id()},
                               {"tool_name", a.tool_name()},
                               {"input_json", a.input_json()},
                               {"reason", a.reason()},
                               {"seq", ev.seq()},
                               {"requested_unix_ms", ev.timestamp_unix_ms()},
                               {"deadline_unix_ms", a.deadline_unix_ms()}});
  }
  return out;
}

// The decision recorded for `call_id` anywhere in the log, or null.
const v1::ApprovalDecided* EarlierDecision(const std::vector<v1::Event>& log,
                                           const std::string& call_id) {
  for (const v1::Event& ev : log) {
    if (ev.has_approval_decided() && ev.approval_decided().call_id() == call_id) {
      return &ev.approval_decided();  // the first one counts (log_state.cc)
    }
  }
  return nullptr;
}

}  // namespace

Result<json::object> ApiHandler::SessionJsonWithApprovals(const v1::Session& meta) const {
  json::object s = SessionToJson(meta);
  if (meta.status() != v1::SESSION_STATUS_REQUIRES_ACTION) return s;
  SINEW_ASSIGN_OR_RETURN(std::vector<v1::Event> log, ReadEvents(meta.id(), meta.next_seq() - 1));
  s["pending_approvals"] = PendingApprovalsJson(log, ReadLogState(log));
  return s;
}

ApiResponse ApiHandler::Decide(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto known = OwnedSession(id, caller.tenant);
  if (!known.ok()) return FromStatus(known.status());
  auto decisions = ParseDecisions(r.body);
  if (!decisions.ok()) return FromStatus(decisions.status());
  // Read, check, append on condition that nothing came in between; else read again.
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto meta = deps_.store->GetSession(id);
    if (!meta.ok()) return FromStatus(meta.status());
    if (IsTerminal(meta->status())) {
      return Error(409, "conflict",
                   "session " + id + " is already " + store::SessionStatusName(meta->status()) +
                       "; no tool call waits for a decision");
    }
    auto log = ReadEvents(id, meta->next_seq() - 1);
    if (!log.ok()) return FromStatus(log.status());
    const LogState state = ReadLogState(*log);
    v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(meta->next_seq());
    // Under the live lease's epoch, if any: the expected seq is the condition, and the
    // driver reads the decision from the log (driver.cc, Append).
    req.set_lease_epoch(meta->has_lease() ? meta->lease().epoch() : 0);
    for (const auto& d : *decisions) {
      const bool asked = state.approval_requested.count(d.call_id) != 0;
      // Decided in this turn, or (when this turn did not ask) in an earlier one that the
      // session has moved on from: its call ran and the model answered again.
      const auto now = state.approval_decided.find(d.call_id);
      const v1::ApprovalDecided* was = now != state.approval_decided.end()
                                           ? &(*log)[now->second].approval_decided()
                                       : asked ? nullptr
                                               : EarlierDecision(*log, d.call_id);
      if (was != nullptr) {
        return Error(409, "conflict",
                     "tool call '" + d.call_id + "' of session " + id + " was already " +
                         (was->approved() ? "approved" : "denied") + " (by " + was->by() + ")");
      }
      if (!asked) {
        return Error(409, "conflict",
                     "tool call '" + d.call_id + "' of session " + id +
                         " is not waiting for a decision (no approval was asked for it in the "
                         "last model response)");
      }
      if (state.finished.count(d.call_id)) {
        return Error(409, "conflict",
                     "tool call '" + d.call_id + "' of session " + id +
                         " already has its result; it no longer waits for a decision");
      }
      v1::Event* ev = req.add_events();
      auto* a = ev->mutable_approval_decided();
      a->set_call_id(d.call_id);
      a->set_approved(d.approved);
      a->set_message(deps_.vault->Redact(SanitizeUtf8(d.message)));
      a->set_by("user");
      a->set_key_id(caller.key_id);
    }
    auto appended = deps_.store->Append(req);
    if (!appended.ok()) {
      const StatusCode code = appended.status().code();
      // The log moved (the driver wrote, another decision came) or the lease changed
      // hands: read again.
      if (code == StatusCode::kFailedPrecondition || code == StatusCode::kAborted) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + 5 * (attempt % 4)));
        continue;
      }
      return FromStatus(appended.status());
    }
    spdlog::info("session {}: {} tool call decision(s) recorded at seq {}-{}", id,
                 decisions->size(), appended->first_seq(), appended->last_seq());
    // The tenant's audit log gets one record per request, naming each call and its fate.
    std::string detail;
    for (const auto& d : *decisions) {
      detail += (detail.empty() ? "" : ", ") + d.call_id + (d.approved ? " approved" : " denied");
    }
    Status audited = RecordAccess(id, AuditEvent(r, caller, "decide", detail));
    if (!audited.ok()) {
      spdlog::warn("session {}: decisions recorded, but not in the tenant audit log: {}", id,
                   audited.message());
    }
    // Its driver here (or a new one, when none drives it) picks the decisions up at once;
    // a driver elsewhere reads them from the log.
    if (!(meta->imported() && meta->lease_epoch() == 0))
      control_->Wake(id);  // a record stays a record
    auto after = deps_.store->GetSession(id);
    if (!after.ok()) return FromStatus(after.status());
    auto body = SessionJsonWithApprovals(*after);
    if (!body.ok()) return FromStatus(body.status());
    ApiResponse out;
    out.body = json::serialize(json::object{{"session", std::move(*body)}});
    return out;
  }
  ApiResponse busy =
      Error(503, "unavailable",
            "session " + id + " changed under every try to record the decision; retry");
  busy.headers.emplace_back("Retry-After", "1");
  return busy;
}

}  // namespace sinew::harness
