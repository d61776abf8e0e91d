// The task a session was submitted with, and what a session's log says about where it
// stands (the state wake() rebuilds). Pure functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sinew/harness/config.h"
#include "sinew/proto/events.pb.h"
#include "sinew/status.h"

namespace sinew::harness {

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
};

// Validates a POST /v1/sessions body against the config and fills defaults.
// Errors: kInvalidArgument naming the field.
// True when the task's "sandbox" object attaches an existing sandbox ("attach": {"id",
// "endpoint"}): the session uses it and leaves it to its owner (never destroys it).
bool AttachesSandbox(const std::string& sandbox_json);
[[nodiscard]] Result<TaskSpec> ParseTaskRequest(std::string_view body, const HarnessConfig& config);
// The normalized task JSON stored in session_created.task_json (and read back by wake).
std::string TaskToJson(const TaskSpec& task);
[[nodiscard]] Result<TaskSpec> TaskFromJson(const std::string& task_json, const HarnessConfig& config);

// Where a session stands, from its log.
struct LogState {
  v1::SessionStatus status = v1::SESSION_STATUS_UNSPECIFIED;
  uint32_t turns = 0;              // model responses so far
  uint64_t output_tokens = 0;      // completion tokens so far
  int last_response = -1;          // index of the last model_response
  int last_user = -1;              // index of the last user_message
  int last_status_change = -1;
  std::map<std::string, bool> started;   // call_id -> a tool_call event exists
  std::map<std::string, bool> finished;  // call_id -> a tool_result exists
  std::string sandbox_id;          // the live sandbox, "" when none
  std::string sandbox_endpoint;
  std::string sandbox_host_id;       // with etcd placement: the host holding it
  std::string sandbox_host_address;
};

LogState ReadLogState(const std::vector<v1::Event>& events);
// Applies one more event to a state (appends keep the state current without re-reading).
void ApplyEvent(const v1::Event& event, int index, LogState* state);

}  // namespace sinew::harness
