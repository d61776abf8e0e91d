// What a session's log says about where it stands (the state wake() rebuilds). Pure
// functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sinew/proto/events.pb.h"

namespace sinew::harness {

// Where a session stands, from its log.
struct LogState {
  v1::SessionStatus status = v1::SESSION_STATUS_UNSPECIFIED;
  uint32_t turns = 0;              // model responses so far
  // Completion tokens so far, the child sessions' included (a delegate call's result
  // carries what its child used: docs/harness.md, "Sub-agents").
  uint64_t output_tokens = 0;
  int last_response = -1;          // index of the last model_response
  int last_user = -1;              // index of the last user_message
  int last_status_change = -1;
  // Index of the last audit event with action "close" (POST /v1/sessions/{id}/close): a
  // session with keep_open completes at the end of its turn instead of waiting for input.
  int close_requested = -1;
  std::map<std::string, bool> started;   // call_id -> a tool_call event exists
  std::map<std::string, bool> finished;  // call_id -> a tool_result exists
  std::map<std::string, bool> changes_sandbox;  // call_id -> a non-idempotent call in the sandbox
  // The child sessions its delegate calls started, in order (from their tool_call events).
  struct Child {
    std::string session_id;
    std::string call_id;
  };
  std::vector<Child> children;
  std::string sandbox_id;          // the live sandbox, "" when none
  std::string sandbox_endpoint;
  std::string sandbox_host_id;       // with etcd placement: the host holding it
  std::string sandbox_host_address;
  bool sandbox_paused = false;     // a sandbox_paused of the live sandbox, not yet resumed
  // Forks with their sandbox (docs/harness.md): the session's kept snapshots
  // (sandbox_snapshot events, less those dropped since), oldest first.
  struct Snapshot {
    std::string id;
    std::string host_address;
    uint64_t at_seq = 0;
  };
  std::vector<Snapshot> snapshots;
  // The seq of the last result of a call that may have changed the live sandbox (a tool
  // call in it that is not idempotent), and the at_seq of the live sandbox's last snapshot:
  // a snapshot is due while the first is the later.
  uint64_t sandbox_changed_seq = 0;
  uint64_t sandbox_snapshot_seq = 0;
  // The snapshot the next sandbox starts from (a fork's sandbox_released), until one is
  // provisioned.
  std::string next_sandbox_snapshot;
  std::string next_snapshot_host_address;
  // Tool approvals of the last model response's calls (docs/harness.md, "Tool
  // approvals"): call_id -> index of its approval_requested event, and call_id -> index
  // of its approval_decided event. A model response starts both afresh.
  std::map<std::string, int> approval_requested;
  std::map<std::string, int> approval_decided;
  // Interrupts (docs/harness.md, "Interrupts") not answered yet: the seq of each
  // interrupt event -> its index, until a user_message with that interrupt_seq.
  std::map<uint64_t, int> pending_interrupts;
  // The calls of the last model response asked about, not yet decided and without a
  // result (a cancel gives waiting calls a result and leaves them undecided).
  std::vector<std::string> PendingApprovals() const;
};

LogState ReadLogState(const std::vector<v1::Event>& events);
// Applies one more event to a state (appends keep the state current without re-reading).
void ApplyEvent(const v1::Event& event, int index, LogState* state);

}  // namespace sinew::harness
