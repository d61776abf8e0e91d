#include "log_state.h"

#include <algorithm>

namespace sinew::harness {

void ApplyEvent(const v1::Event& ev, int index, LogState* s) {
  switch (ev.payload_case()) {
    case v1::Event::kUserMessage:
      s->last_user = index;
      if (ev.user_message().interrupt_seq() != 0) s->pending_interrupts.erase(ev.user_message().interrupt_seq());
      break;
    case v1::Event::kInterrupt:
      s->pending_interrupts.emplace(ev.seq(), index);
      break;
    case v1::Event::kModelResponse:
      s->last_response = index;
      s->approval_requested.clear();
      s->approval_decided.clear();
      ++s->turns;
      s->output_tokens += ev.model_response().usage().completion_tokens();
      break;
    case v1::Event::kToolCall:
      s->started[ev.tool_call().call_id()] = true;
      if (!ev.tool_call().sandbox_id().empty() && !ev.tool_call().idempotent()) {
        s->changes_sandbox[ev.tool_call().call_id()] = true;
      }
      if (!ev.tool_call().child_session_id().empty()) {
        s->children.push_back({ev.tool_call().child_session_id(), ev.tool_call().call_id()});
      }
      break;
    case v1::Event::kApprovalRequested:
      s->approval_requested.emplace(ev.approval_requested().call_id(), index);
      break;
    case v1::Event::kApprovalDecided:
      s->approval_decided.emplace(ev.approval_decided().call_id(), index);  // the first one counts
      break;
    case v1::Event::kToolResult:
      s->finished[ev.tool_result().call_id()] = true;
      if (s->changes_sandbox.count(ev.tool_result().call_id()) != 0 && !s->sandbox_id.empty()) {
        s->sandbox_changed_seq = ev.seq();
      }
      s->output_tokens += ev.tool_result().child_output_tokens();
      break;
    case v1::Event::kSandboxProvisioned:
      s->sandbox_id = ev.sandbox_provisioned().sandbox_id();
      s->sandbox_endpoint = ev.sandbox_provisioned().endpoint();
      s->sandbox_host_id = ev.sandbox_provisioned().host_id();
      s->sandbox_host_address = ev.sandbox_provisioned().host_address();
      s->sandbox_paused = false;
      s->sandbox_changed_seq = 0;
      s->sandbox_snapshot_seq = 0;
      s->next_sandbox_snapshot.clear();
      s->next_snapshot_host_address.clear();
      break;
    case v1::Event::kSandboxSnapshot: {
      const auto& snap = ev.sandbox_snapshot();
      for (const auto& dropped : snap.dropped_snapshot_ids()) {
        std::erase_if(s->snapshots, [&](const LogState::Snapshot& kept) { return kept.id == dropped; });
      }
      s->snapshots.push_back({snap.snapshot_id(), snap.host_address(), snap.at_seq()});
      if (snap.sandbox_id() == s->sandbox_id) s->sandbox_snapshot_seq = std::max(s->sandbox_snapshot_seq, snap.at_seq());
      break;
    }
    case v1::Event::kSandboxPaused:
      if (ev.sandbox_paused().sandbox_id() == s->sandbox_id) s->sandbox_paused = true;
      break;
    case v1::Event::kSandboxResumed:
      if (ev.sandbox_resumed().sandbox_id() == s->sandbox_id) s->sandbox_paused = false;
      break;
    case v1::Event::kSandboxReleased:
      if (ev.sandbox_released().sandbox_id() == s->sandbox_id) s->sandbox_id.clear();
      s->next_sandbox_snapshot = ev.sandbox_released().next_from_snapshot();
      s->next_snapshot_host_address = ev.sandbox_released().snapshot_host_address();
      break;
    case v1::Event::kSandboxLost:
      if (ev.sandbox_lost().sandbox_id() == s->sandbox_id) s->sandbox_id.clear();
      break;
    case v1::Event::kAudit:
      if (ev.audit().action() == "close") s->close_requested = index;
      break;
    case v1::Event::kStatusChange:
      s->status = ev.status_change().to();
      s->last_status_change = index;
      break;
    default:
      break;
  }
  if (s->sandbox_id.empty()) {
    s->sandbox_paused = false;
    s->sandbox_endpoint.clear();
    s->sandbox_host_id.clear();
    s->sandbox_host_address.clear();
  }
}

std::vector<std::string> LogState::PendingApprovals() const {
  std::vector<std::string> out;
  for (const auto& [call_id, index] : approval_requested) {
    if (!approval_decided.count(call_id) && !finished.count(call_id)) out.push_back(call_id);
  }
  return out;
}

LogState ReadLogState(const std::vector<v1::Event>& events) {
  LogState s;
  s.status = v1::SESSION_STATUS_QUEUED;
  for (size_t i = 0; i < events.size(); ++i) ApplyEvent(events[i], static_cast<int>(i), &s);
  return s;
}

}  // namespace sinew::harness
