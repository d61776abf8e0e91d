// The task a session was submitted with: POST /v1/sessions validated against the config,
// and the JSON form stored in session_created. Pure functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "approvals.h"
#include "sinew/harness/config.h"
#include "sinew/status.h"

namespace sinew::harness {

inline constexpr uint32_t kDefaultIdleCloseSeconds = 3600;
inline constexpr uint32_t kMaxIdleCloseSeconds = 30 * 24 * 3600;
inline constexpr uint32_t kMaxIdlePauseSeconds = 30 * 24 * 3600;

// Sub-agents (docs/harness.md, "Sub-agents"): whether the session may start child
// sessions with the delegate tool, how many, and how deep below it.
struct DelegateSpec {
  bool enabled = false;
  uint32_t max_children = 8;  // delegate calls per session (1-1000)
  uint32_t max_depth = 2;     // levels of sessions below this one (1-16)
};
inline constexpr uint32_t kMaxDelegateChildren = 1000;
inline constexpr uint32_t kMaxDelegateDepth = 16;

// A child session's parent: the session and its delegate call (call_seq: the seq of that
// call's tool_call event in the parent's log, where the child looks for its result).
// A child started with `sandbox: "fork"` also names the snapshot of its parent's sandbox
// that its own sandbox is restored from, and the provisioner that holds it (host_address;
// "" with a single sinew-sandboxd); the child deletes the snapshot when it ends.
struct ParentRef {
  std::string session_id;
  std::string call_id;
  uint64_t call_seq = 0;
  std::string sandbox_snapshot;
  std::string snapshot_host_address;
};

// Copies of the session's sandbox kept for forks (docs/harness.md, "Forks with their
// sandbox"): none; when it is paused; or after every call that may change it.
enum class SnapshotPolicy { kNone, kOnPause, kPerCall };
inline constexpr uint32_t kSessionSnapshotsKept = 32;  // the newest; older ones are deleted

struct TaskSpec {
  std::string prompt;
  std::string title;
  std::string model;   // a key of config.models
  std::string system;
  std::vector<std::string> tools;  // empty: all
  std::string sandbox_json;        // the "sandbox" object, "" when absent
  uint32_t max_turns = 0;
  uint64_t max_output_tokens = 0;
  uint32_t max_wall_seconds = 0;
  std::map<std::string, std::string> metadata;
  // The task's "approvals", or the tenant's default copied in at creation (not present:
  // every call is allowed). Stored in session_created.task_json, so a session keeps the
  // policy it was created with.
  ApprovalPolicy approvals;
  // A conversation that stays open (docs/harness.md, "Conversations that stay open"): the
  // end of a model turn leaves the session waiting_for_input instead of completed; it
  // completes when closed, or idle_close_seconds after its last event.
  bool keep_open = false;
  uint32_t idle_close_seconds = kDefaultIdleCloseSeconds;
  // Idle sandboxes (docs/harness.md, "Idle sandboxes"): the session's sandbox is paused
  // once it has had no call and no process besides its agent for this long while the
  // session waits on its model or on a person; the next call resumes it. 0: never.
  uint32_t idle_pause_seconds = 0;
  SnapshotPolicy snapshots = SnapshotPolicy::kNone;
  DelegateSpec delegate;
  ParentRef parent;  // set for a child session only (by its parent's driver, never by a request)
};

// "none" (or ""), "on_pause", "per_call"; nullopt for anything else.
std::optional<SnapshotPolicy> ParseSnapshotPolicy(std::string_view name);
const char* SnapshotPolicyName(SnapshotPolicy policy);

// Validates a POST /v1/sessions body against the config and fills defaults.
// Errors: kInvalidArgument naming the field.
// True when the task's "sandbox" object attaches an existing sandbox ("attach": {"id",
// "endpoint"}): the session uses it and leaves it to its owner (never destroys it).
bool AttachesSandbox(const std::string& sandbox_json);
[[nodiscard]] Result<TaskSpec> ParseTaskRequest(std::string_view body, const HarnessConfig& config);
// Gives a task without "approvals" its tenant's default (config.tenants.<t>.approvals).
void ApplyTenantApprovals(const HarnessConfig& config, const std::string& tenant, TaskSpec* task);
// The normalized task JSON stored in session_created.task_json (and read back by wake).
std::string TaskToJson(const TaskSpec& task);
[[nodiscard]] Result<TaskSpec> TaskFromJson(const std::string& task_json, const HarnessConfig& config);

}  // namespace sinew::harness
