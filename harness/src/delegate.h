// Sub-agents (docs/harness.md, "Sub-agents"): what a delegate tool call asks for, the child
// session it comes to, and what the child's end gives back to its parent. Pure functions
// of their inputs; the driver (driver_delegate.cc) does the writing and the waiting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/harness/config.h"
#include "sinew/proto/events.pb.h"
#include "sinew/status.h"
#include "task_spec.h"
#include "tool_catalog.h"

namespace sinew::harness {

// The id of the child session that call `call_key` (unique in the parent's log) of
// session `parent_id` starts: the same for the same call, so that a driver resuming the
// call after a crash finds the child instead of starting a second one. In the store's id
// layout (the parent's 6 bytes of creation time, then 10 bytes of SHA-256 of the two).
std::string ChildSessionId(const std::string& parent_id, const std::string& call_key);

// What the parent has left for a child when the call is made.
struct DelegateBudget {
  uint64_t output_tokens = 0;  // the parent's max_output_tokens minus what it used (children included)
  uint32_t wall_seconds = 0;   // the parent's max_wall_seconds minus its age
};

// The child's task from a delegate call's input ({task, model?, title?, tools?, limits?,
// sandbox?}): the parent's model, tools, sandbox spec and approval policy unless the input
// narrows them; limits capped by the parent's (`budget` for tokens and time); delegate
// enabled one level less deep. `*fork_sandbox` (when given) is set when the input asks for
// a copy of the parent's sandbox (`sandbox: "fork"`): the child's spec is then the
// parent's, and the caller adds the snapshot (ParentRef.sandbox_snapshot). kInvalidArgument
// (for the model, naming the field) when the input is wrong, asks for more than the parent
// has, or for a fork of a sandbox the parent only attached (its owner's).
[[nodiscard]] Result<TaskSpec> ChildTask(const std::string& input_json, const TaskSpec& parent,
                                         const DelegateBudget& budget, const HarnessConfig& config,
                                         bool* fork_sandbox = nullptr);

// The delegate call's result once its child ended, from the child's log: its last answer
// (completed), or why it failed or was cancelled (an error result). Sets child_session_id
// and child_output_tokens (what the child used, its own children included).
v1::Event ChildResultEvent(const std::string& call_id, const std::string& child_id,
                           const std::vector<v1::Event>& child_log);

}  // namespace sinew::harness
