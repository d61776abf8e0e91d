// SessionDriver's tool approvals (docs/harness.md, "Tool approvals"): which calls of a
// model response are denied, and the wait in requires_action until each asked call is
// decided through the API or its recorded deadline passes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "approvals.h"
#include "driver.h"
#include "json_util.h"
#include "tool_catalog.h"

namespace sinew::harness {

std::optional<std::string> SessionDriver::DenialOf(const v1::ToolCallSpec& spec) const {
  auto decided = state_.approval_decided.find(spec.call_id());
  if (decided != state_.approval_decided.end()) {
    const v1::ApprovalDecided& d = log_[decided->second].approval_decided();
    if (d.approved()) return std::nullopt;
    if (d.by() == "timeout") return "denied: " + d.message() + "; the call did not run";
    return "denied by the user; the call did not run" +
           (d.message().empty() ? std::string() : ". The user says: " + d.message());
  }
  if (FindTool(spec.name()) == nullptr) return std::nullopt;  // not available: ExecuteCall says so
  const ApprovalVerdict verdict = EvaluateApproval(task_.approvals, spec.name(), spec.input_json());
  if (verdict.policy == ToolPolicy::kDeny)
    return "denied by policy (" + verdict.reason + "); the call did not run";
  return std::nullopt;
}

Task<Result<bool>> SessionDriver::AwaitApprovals(const v1::ModelResponse& response) {
  std::vector<v1::Event> asks;
  const int64_t now = NowUnixMs();
  for (const auto& spec : response.tool_calls()) {
    // A call that started was allowed or approved before (a resumed session).
    if (state_.finished.count(spec.call_id()) || state_.started.count(spec.call_id()) ||
        state_.approval_requested.count(spec.call_id())) {
      continue;
    }
    // A tool the session does not have gets its error without asking anyone.
    if (FindTool(spec.name()) == nullptr ||
        (!task_.tools.empty() &&
         std::find(task_.tools.begin(), task_.tools.end(), spec.name()) == task_.tools.end())) {
      continue;
    }
    const ApprovalVerdict verdict =
        EvaluateApproval(task_.approvals, spec.name(), spec.input_json());
    if (verdict.policy != ToolPolicy::kAsk) continue;
    v1::Event ev;
    auto* a = ev.mutable_approval_requested();
    a->set_call_id(spec.call_id());
    a->set_tool_name(spec.name());
    a->set_input_json(spec.input_json());
    a->set_reason(verdict.reason);
    a->set_deadline_unix_ms(now + static_cast<int64_t>(verdict.ask_timeout_seconds) * 1000);
    asks.push_back(std::move(ev));
  }
  if (asks.empty() && state_.PendingApprovals().empty()) co_return true;
  if (!asks.empty() || state_.status != v1::SESSION_STATUS_REQUIRES_ACTION) {
    const size_t waiting = asks.size() + state_.PendingApprovals().size();
    if (state_.status != v1::SESSION_STATUS_REQUIRES_ACTION) {
      // Instead of running: any status change to running still pending is superseded.
      std::erase_if(pending_, [](const v1::Event& e) { return e.has_status_change(); });
      asks.push_back(StatusEvent(state_.status, v1::SESSION_STATUS_REQUIRES_ACTION,
                                 std::to_string(waiting) + " tool call(s) wait for a decision"));
    }
    SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(asks)));
    spdlog::info("session {}: requires action: {} tool call(s) wait for a decision", id_, waiting);
  }
  while (true) {
    const std::vector<std::string> waiting = state_.PendingApprovals();
    if (waiting.empty()) co_return true;
    if (deps_.stopping->load() || fenced_ || CancelRequested() || Interrupting()) co_return false;
    // A deadline counts from the request's record, so it holds across crashes.
    std::vector<v1::Event> expired;
    const int64_t t = NowUnixMs();
    for (const auto& call_id : waiting) {
      const v1::ApprovalRequested& req =
          log_[state_.approval_requested.at(call_id)].approval_requested();
      if (req.deadline_unix_ms() > t) continue;
      // The session's policy is its task's, fixed at creation: the same wait as asked with.
      const uint32_t waited_s =
          EvaluateApproval(task_.approvals, req.tool_name(), req.input_json()).ask_timeout_seconds;
      v1::Event ev;
      auto* d = ev.mutable_approval_decided();
      d->set_call_id(call_id);
      d->set_approved(false);
      d->set_by("timeout");
      d->set_message("no decision within " + std::to_string(waited_s) +
                     " s (the approval request's deadline)");
      expired.push_back(std::move(ev));
    }
    if (!expired.empty()) {
      SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(expired)));
      continue;
    }
    // The sandbox idles while a person decides: paused once idle_pause_seconds have passed.
    SINEW_CO_RETURN_IF_ERROR(co_await PauseIfIdle());
    // Decisions come through the API of any harness, straight into the log.
    co_await SleepFor(std::chrono::milliseconds(200));
    SINEW_CO_RETURN_IF_ERROR(co_await ReadNewEvents());
  }
}

}  // namespace sinew::harness
