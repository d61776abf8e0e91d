#include <boost/json.hpp>

#include "sinew/json_fields.h"
#include "tool_catalog.h"

namespace sinew::harness {

// The sandbox tools mirror sinew-sandbox-agent's ListTools (names, schemas, idempotency);
// harness_sandbox_test checks them against a real sandbox. They are known here because
// the model needs them before the first tool call, when no sandbox exists yet.
const std::vector<ToolInfo>& ToolCatalog() {
  static const std::vector<ToolInfo> kTools = {
      {"bash",
       "Runs a bash command line in the sandbox's /workspace and returns its output and exit "
       "status. Not idempotent: it may change the sandbox.",
       R"({"type":"object","properties":{"command":{"type":"string","description":"bash command line"},)"
       R"("timeout":{"type":"integer","minimum":1,"description":"seconds"},)"
       R"("cwd":{"type":"string","description":"working directory, relative to the workspace or absolute"}},)"
       R"("required":["command"],"additionalProperties":false})",
       false, true},
      {"read_file", "Reads a text file of the sandbox (optionally a range of lines). Idempotent.",
       R"({"type":"object","properties":{"path":{"type":"string"},)"
       R"("offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1}},)"
       R"("required":["path"],"additionalProperties":false})",
       true, true},
      {"write_file", "Writes a whole file in the sandbox, creating directories. Idempotent.",
       R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},)"
       R"("required":["path","content"],"additionalProperties":false})",
       true, true},
      {"edit_file",
       "Replaces old_string by new_string in a sandbox file. Not idempotent: once applied, the "
       "old string is gone.",
       R"({"type":"object","properties":{"path":{"type":"string"},)"
       R"("old_string":{"type":"string","minLength":1},"new_string":{"type":"string"},)"
       R"("replace_all":{"type":"boolean"}},)"
       R"("required":["path","old_string","new_string"],"additionalProperties":false})",
       false, true},
      {"list_files",
       "Lists files and directories below `path` (default: the workspace) whose path relative "
       "to it matches the glob `pattern` (`*`, `?`, `[...]`, `**`). Idempotent.",
       R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},)"
       R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})",
       true, true},
      {"grep",
       "Searches text files below `path` for lines matching the extended regular expression "
       "`pattern` (no back-references; optional `glob`, `ignore_case`, `limit`). Idempotent.",
       R"({"type":"object","properties":{"pattern":{"type":"string","maxLength":4096},"path":{"type":"string"},)"
       R"("glob":{"type":"string"},"ignore_case":{"type":"boolean"},)"
       R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})",
       true, true},
      {"http_request",
       "Makes an HTTP request from the harness to an allowed host; credentials for that host "
       "are added by the harness (you never see them). GET and HEAD are idempotent, other "
       "methods are not.",
       R"({"type":"object","properties":{"method":{"type":"string","enum":["GET","HEAD","POST","PUT","PATCH","DELETE"]},)"
       R"("url":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}},)"
       R"("body":{"type":"string"}},"required":["url"],"additionalProperties":false})",
       false, false},
  };
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
