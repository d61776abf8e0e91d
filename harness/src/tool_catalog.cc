#include <boost/json.hpp>

#include "sinew/json_fields.h"
#include "sinew/sandbox/tool_specs.h"
#include "tool_catalog.h"

namespace sinew::harness {

// The sandbox tools are sinew-sandbox-agent's (sinew/sandbox/tool_specs.h); they are known
// here because the model needs them before the first tool call, when no sandbox exists yet.
const std::vector<ToolInfo>& ToolCatalog() {
  static const std::vector<ToolInfo> kTools = [] {
    std::vector<ToolInfo> tools;
    for (const auto& spec : sandbox::kSandboxToolSpecs) {
      tools.push_back({std::string(spec.name), std::string(spec.description),
                       std::string(spec.input_schema_json), spec.idempotent, true});
    }
    tools.push_back(
        {"http_request",
         "Makes an HTTP request from the harness to an allowed host; credentials for that host "
         "are added by the harness (you never see them). GET and HEAD are idempotent, other "
         "methods are not.",
         R"({"type":"object","properties":{"method":{"type":"string","enum":["GET","HEAD","POST","PUT","PATCH","DELETE"]},)"
         R"("url":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}},)"
         R"("body":{"type":"string"}},"required":["url"],"additionalProperties":false})",
         false, false});
    // Runs in the harness too: a child session (docs/harness.md, "Sub-agents"). Offered only
    // to a session whose task enables it. Safe to resume after a crash: the child is one
    // per call (its id is derived from the call), so resuming finds it again.
    tools.push_back(
        {std::string(kDelegateTool),
         "Starts a sub-agent: a child session with its own task, model, tools and limits, and "
         "waits for its final answer, which becomes this call's result. Its token use counts "
         "against your budget. sandbox \"new\" (default) gives it a fresh sandbox; \"fork\" a "
         "copy of yours.",
         R"({"type":"object","properties":{"task":{"type":"string","description":"what the sub-agent is to do"},)"
         R"("model":{"type":"string"},"tools":{"type":"array","items":{"type":"string"}},)"
         R"("limits":{"type":"object","properties":{"max_turns":{"type":"integer","minimum":1},)"
         R"("max_output_tokens":{"type":"integer","minimum":1},"max_wall_seconds":{"type":"integer","minimum":1}},)"
         R"("additionalProperties":false},"sandbox":{"type":"string","enum":["new","fork"]}},)"
         R"("required":["task"],"additionalProperties":false})",
         true, false});
    return tools;
  }();
  return kTools;
}

const ToolInfo* FindTool(const std::string& name) {
  for (const auto& t : ToolCatalog()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool CallIsIdempotent(const ToolInfo& tool, const std::string& input_json) {
  if (tool.name != "http_request") return tool.idempotent;
  boost::system::error_code ec;
  auto v = boost::json::parse(input_json, ec);
  if (ec || !v.is_object()) return true;  // it will fail validation, harmlessly
  // Absent is GET; a method of another type or "" fails validation, harmlessly.
  const std::string method = json_fields::StringField(v.as_object(), "method");
  return method.empty() || method == "GET" || method == "HEAD";
}

std::vector<ToolDefinition> ToolDefinitions(const std::vector<std::string>& names) {
  std::vector<ToolDefinition> out;
  for (const auto& t : ToolCatalog()) {
    bool allowed = names.empty();
    for (const auto& n : names) allowed = allowed || n == t.name;
    if (allowed) out.push_back({t.name, t.description, t.input_schema_json});
  }
  return out;
}

}  // namespace sinew::harness
