// Sandbox tool inputs (sandbox-agent/src/agent: ToolRegistry::Execute, the tools'
// ToolInput validation, ResolvePath, and the file tools themselves) in a temporary
// workspace. Input: the tool name, a newline, the input JSON.
// Left out, so that fuzzing runs nothing and touches nothing outside the workspace:
// bash (it runs its input as a command), and inputs whose strings hold an absolute path
// or ".." (read_file, list_files and grep read any path the sandbox can, by design).
// The workspace holds no symbolic links and the tools cannot make one.
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/tools.h"
#include "fuzz_util.h"

namespace {

bool StaysInside(const boost::json::value& v) {
  if (v.is_string()) {
    std::string_view s = v.get_string();
    return !s.starts_with('/') && !s.starts_with('~') && s.find("..") == std::string_view::npos;
  }
  if (v.is_object()) {
    for (const auto& kv : v.get_object()) {
      if (!StaysInside(kv.value())) return false;
    }
  }
  if (v.is_array()) {
    for (const auto& e : v.get_array()) {
      if (!StaysInside(e)) return false;
    }
  }
  return true;
}

// Inputs write files into it, so it is made afresh every kInputsPerWorkspace inputs: a
// long run would otherwise grow it without bound and every list_files and grep with it
// (one hour's run reached 28 s per input), and an input's cost would depend on the run.
constexpr int kInputsPerWorkspace = 500;

struct Workspace {
  std::filesystem::path dir;
  int inputs = 0;
  Workspace() {
    dir = std::filesystem::temp_directory_path() / ("sinew-fuzz-tools-" + std::to_string(::getpid()));
    Reset();
  }
  void Reset() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "src" / "deep");
    std::ofstream(dir / "a.txt") << "alpha\nbeta\ngamma alpha\n";
    std::ofstream(dir / "src" / "main.cc") << "int main() {\n  return 0;\n}\n";
    std::ofstream(dir / "src" / "deep" / "empty.txt");
  }
  ~Workspace() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Workspace workspace;
  static const sinew::sandbox::ToolRegistry registry = [] {
    sinew::sandbox::ToolConfig config;
    config.workspace = workspace.dir;
    config.max_output_bytes = 4096;
    // Well inside libFuzzer's 10 s per input, also when the fuzzed inputs have written
    // many files into the workspace.
    config.grep_time_budget = std::chrono::seconds(2);
    return sinew::sandbox::ToolRegistry(config);
  }();
  if (++workspace.inputs % kInputsPerWorkspace == 0) workspace.Reset();
  const auto [name, input] = sinew::fuzz::SplitAt(sinew::fuzz::Bytes(data, size), "\n");
  if (name == "bash") return 0;
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(input, ec);
  if (!ec && !StaysInside(parsed)) return 0;
  auto result = registry.Execute(name, input);
  if (result.is_error() && result.output().empty()) sinew::fuzz::Violated("an error result without a message");
  return 0;
}
