// How a sandbox ended, in the words of the session log (events.proto SandboxLost.outcome)
// and as the evaluation runner counts it.
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "sinew/proto/sandbox.pb.h"

namespace sinew::sandbox {

// "running", "destroyed", "exited", "oom", "lifetime" or "crashed" (for LOST).
inline std::string_view OutcomeName(v1::SandboxOutcome outcome) {
  switch (outcome) {
    case v1::SANDBOX_OUTCOME_DESTROYED:
      return "destroyed";
    case v1::SANDBOX_OUTCOME_EXITED:
      return "exited";
    case v1::SANDBOX_OUTCOME_OOM:
      return "oom";
    case v1::SANDBOX_OUTCOME_LIFETIME:
      return "lifetime";
    case v1::SANDBOX_OUTCOME_LOST:
      return "crashed";
    default:
      return "running";
  }
}

// True for outcomes that are the infrastructure's doing rather than the task's: killed
// for memory, at the lifetime limit, or lost. Evaluation runs count them apart.
inline bool IsInfrastructureError(v1::SandboxOutcome outcome) {
  return outcome == v1::SANDBOX_OUTCOME_OOM || outcome == v1::SANDBOX_OUTCOME_LIFETIME ||
         outcome == v1::SANDBOX_OUTCOME_LOST;
}

}  // namespace sinew::sandbox
