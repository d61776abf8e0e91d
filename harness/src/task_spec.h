// The task a session was submitted with: POST /v1/sessions validated against the config,
// and the JSON form stored in session_created. Pure functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "approvals.h"
#include "sinew/harness/config.h"
#include "sinew/status.h"

namespace sinew::harness {

inline constexpr uint32_t kDefaultIdleCloseSeconds = 3600;
inline constexpr uint32_t kMaxIdleCloseSeconds = 30 * 24 * 3600;

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
};

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
