// The tools sinew-sandbox-agent serves inside a sandbox, written once: sinew-sandbox-agent
// answers ListTools with them, and the harness offers them to models before the first
// tool call, when no sandbox exists yet.
//
// Header-only and free of gRPC and protobuf, so that the statically linked agent and the
// harness both build from it.
#pragma once

#include <array>
#include <string_view>

namespace sinew::sandbox {

struct SandboxToolSpec {
  std::string_view name;
  // For the model; ends with whether the tool is idempotent.
  std::string_view description;
  // JSON Schema (draft 2020-12 subset) of the tool's input, a JSON object.
  std::string_view input_schema_json;
  // Whether a call may be re-run after a crash with the same input.
  bool idempotent;
};

inline constexpr SandboxToolSpec kBashToolSpec{
    "bash",
    "Runs a bash command line in the sandbox's /workspace and returns its output and exit "
    "status. Not idempotent: it may change the sandbox.",
    R"({"type":"object","properties":{"command":{"type":"string","description":"bash command line"},)"
    R"("timeout":{"type":"integer","minimum":1,"description":"seconds"},)"
    R"("cwd":{"type":"string","description":"working directory, relative to the workspace or absolute"}},)"
    R"("required":["command"],"additionalProperties":false})",
    false};

inline constexpr SandboxToolSpec kReadFileToolSpec{
    "read_file", "Reads a text file of the sandbox (optionally a range of lines). Idempotent.",
    R"({"type":"object","properties":{"path":{"type":"string"},)"
    R"("offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1}},)"
    R"("required":["path"],"additionalProperties":false})",
    true};

inline constexpr SandboxToolSpec kWriteFileToolSpec{
    "write_file", "Writes a whole file in the sandbox, creating directories. Idempotent.",
    R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},)"
    R"("required":["path","content"],"additionalProperties":false})",
    true};

inline constexpr SandboxToolSpec kEditFileToolSpec{
    "edit_file",
    "Replaces old_string by new_string in a sandbox file. Not idempotent: once applied, the "
    "old string is gone.",
    R"({"type":"object","properties":{"path":{"type":"string"},)"
    R"("old_string":{"type":"string","minLength":1},"new_string":{"type":"string"},)"
    R"("replace_all":{"type":"boolean"}},)"
    R"("required":["path","old_string","new_string"],"additionalProperties":false})",
    false};

inline constexpr SandboxToolSpec kListFilesToolSpec{
    "list_files",
    "Lists files and directories below `path` (default: the workspace) whose path relative "
    "to it matches the glob `pattern` (`*`, `?`, `[...]`, `**`). Idempotent.",
    R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},)"
    R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})",
    true};

inline constexpr SandboxToolSpec kGrepToolSpec{
    "grep",
    "Searches text files below `path` for lines matching the extended regular expression "
    "`pattern` (no back-references; optional `glob`, `ignore_case`, `limit`). Idempotent.",
    R"({"type":"object","properties":{"pattern":{"type":"string","maxLength":4096},"path":{"type":"string"},)"
    R"("glob":{"type":"string"},"ignore_case":{"type":"boolean"},)"
    R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})",
    true};

// Every sandbox tool, in the order ListTools returns them.
inline constexpr std::array<SandboxToolSpec, 6> kSandboxToolSpecs = {
    kBashToolSpec,     kReadFileToolSpec,  kWriteFileToolSpec,
    kEditFileToolSpec, kListFilesToolSpec, kGrepToolSpec};

}  // namespace sinew::sandbox
