// Tool: one thing the model can call inside a sandbox (bash, read_file, ...), and the
// configuration all tools share.
//
// Thread-safety: Run may be called concurrently; tools keep no per-call state.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "sinew/proto/sandbox.pb.h"
#include "sinew/sandbox/tool_specs.h"

namespace sinew::sandbox {

struct ToolConfig {
  // Relative paths resolve against it; write_file and edit_file stay below it.
  // Default: /workspace
  std::filesystem::path workspace = "/workspace";
  // Cap of the output a tool returns; head and tail are kept. Default: 30000
  size_t max_output_bytes = 30000;
  // bash timeout when the input names none, and the largest one accepted.
  // Default: 120 and 3600 seconds
  int default_timeout_s = 120;
  int max_timeout_s = 3600;
  // grep stops searching after this long and says where it stopped. Default: 30 s
  std::chrono::milliseconds grep_time_budget{30000};
  // States of the regular expression matcher one line's search may visit, plus 16 per
  // byte of the line; a line that needs more is skipped and reported. Default: 1000000
  uint64_t grep_line_states = 1'000'000;
  // Largest file the Sandbox service's ReadFile sends and WriteFile takes. Default: 1 GiB
  uint64_t max_transfer_bytes = uint64_t{1} << 30;
};

// Receives streamed output: (is_stderr, bytes).
using ChunkSink = std::function<void(bool is_stderr, std::string_view bytes)>;

// What a tool call may use besides its input. Both members may be empty.
struct RunContext {
  ChunkSink sink;                   // output as it is produced
  std::function<bool()> cancelled;  // true once the caller gave up (bash then kills its command)
};

class Tool {
 public:
  // `spec`: the tool's name, description, schema and idempotency (tool_specs.h).
  explicit Tool(const SandboxToolSpec& spec) : spec_(spec) {}
  virtual ~Tool() = default;
  const SandboxToolSpec& spec() const { return spec_; }
  std::string_view name() const { return spec_.name; }
  // Runs the tool on an already-parsed JSON object. Expected failures come back as a
  // result with is_error set.
  virtual v1::ExecuteResult Run(const boost::json::object& input, const RunContext& ctx) const = 0;

 private:
  const SandboxToolSpec& spec_;
};

// An is_error result whose output is `message`.
v1::ExecuteResult ErrorResult(std::string message);
// A successful result with `output`.
v1::ExecuteResult OkResult(std::string output, bool truncated = false);

}  // namespace sinew::sandbox
