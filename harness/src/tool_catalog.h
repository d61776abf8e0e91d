// The tools the harness offers a model: sandbox tools (run inside a runc sandbox by
// sinew-sandbox-agent, sandbox_backend.h) and proxy tools (run here, in the harness,
// where the secrets are: proxy_tools.h), and what a tool call comes to (ToolOutcome).
//
// Thread-safety: the catalog is immutable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/harness/model_client.h"

namespace sinew::harness {

// The tool that starts a sub-agent (a child session; docs/harness.md, "Sub-agents").
inline constexpr std::string_view kDelegateTool = "delegate";

struct ToolInfo {
  std::string name;
  std::string description;
  std::string input_schema_json;
  bool idempotent = false;
  bool needs_sandbox = true;
};

// Every tool the harness knows, sandbox tools first (they mirror sinew-sandbox-agent).
const std::vector<ToolInfo>& ToolCatalog();
const ToolInfo* FindTool(const std::string& name);
// Whether this particular call may be re-run after a crash (http_request: GET/HEAD only).
bool CallIsIdempotent(const ToolInfo& tool, const std::string& input_json);
std::vector<ToolDefinition> ToolDefinitions(const std::vector<std::string>& names);

struct ToolOutcome {
  std::string output;
  bool is_error = false;
  int32_t exit_status = 0;
  int32_t signal = 0;
  bool timed_out = false;  // bash: its timeout fired
  bool truncated = false;
  int64_t duration_ms = 0;
};

}  // namespace sinew::harness
