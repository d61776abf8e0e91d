#include <chrono>
#include <exception>

#include "agent/output_limiter.h"
#include "agent/tools.h"

namespace sinew::sandbox {

v1::ExecuteResult ErrorResult(std::string message) {
  v1::ExecuteResult r;
  r.set_output(SanitizeUtf8(message));
  r.set_is_error(true);
  return r;
}

v1::ExecuteResult OkResult(std::string output, bool truncated) {
  v1::ExecuteResult r;
  r.set_output(SanitizeUtf8(output));
  r.set_truncated(truncated);
  return r;
}

ToolRegistry::ToolRegistry(const ToolConfig& config) {
  tools_.push_back(MakeBashTool(config));
  tools_.push_back(MakeReadFileTool(config));
  tools_.push_back(MakeWriteFileTool(config));
  tools_.push_back(MakeEditFileTool(config));
  tools_.push_back(MakeListFilesTool(config));
  tools_.push_back(MakeGrepTool(config));
}

v1::ExecuteResult ToolRegistry::Execute(std::string_view name, std::string_view input_json,
                                        const RunContext& ctx) const {
  auto start = std::chrono::steady_clock::now();
  const Tool* tool = nullptr;
  for (const auto& t : tools_) {
    if (t->name() == name) tool = t.get();
  }
  v1::ExecuteResult result;
  if (tool == nullptr) {
    std::string names;
    for (const auto& t : tools_) names += (names.empty() ? "" : ", ") + std::string(t->name());
    result = ErrorResult("unknown tool '" + std::string(name) + "'; available tools: " + names);
  } else {
    boost::system::error_code ec;
    boost::json::value input = boost::json::parse(input_json.empty() ? "{}" : input_json, ec);
    if (ec) {
      result = ErrorResult(
          "input of tool '" + std::string(name) + "' is not valid JSON (" + ec.message() +
          "); send a JSON object matching its schema: " + std::string(tool->spec().input_schema_json));
    } else if (!input.is_object()) {
      result = ErrorResult("input of tool '" + std::string(name) +
                           "' must be a JSON object; its schema: " + std::string(tool->spec().input_schema_json));
    } else {
      try {
        result = tool->Run(input.get_object(), ctx);
      } catch (const std::exception& e) {
        result = ErrorResult("tool '" + std::string(name) + "' failed: " + e.what());
      }
    }
  }
  if (result.duration_ms() == 0) {
    result.set_duration_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
  }
  return result;
}

std::vector<v1::ToolSpec> ToolRegistry::Specs() const {
  std::vector<v1::ToolSpec> specs;
  for (const auto& t : tools_) {
    v1::ToolSpec spec;
    spec.set_name(std::string(t->spec().name));
    spec.set_description(std::string(t->spec().description));
    spec.set_input_schema_json(std::string(t->spec().input_schema_json));
    spec.set_idempotent(t->spec().idempotent);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace sinew::sandbox
