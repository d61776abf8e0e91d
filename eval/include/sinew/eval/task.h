// Task and suite loading: the Harbor / Terminal-Bench 2 task folder format (docs/eval.md).
//
//   TASK/instruction.md          what the agent is told (required)
//   TASK/task.toml               [metadata] [agent] [verifier] [environment] (required)
//   TASK/environment/files/      copied into /workspace before the agent starts (optional)
//   TASK/environment/setup.sh    run in the sandbox before the agent (optional)
//   TASK/solution/solve.sh       the reference solution (required)
//   TASK/tests/test.sh           the verifier; writes /logs/verifier/reward.txt (required)
//
// Thread-safety: free functions; a Task is a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::eval {

struct Task {
  std::string name;         // [metadata] name; default: the folder name
  std::string dir;          // absolute path of the task folder
  std::string instruction;  // contents of instruction.md
  std::string difficulty;   // [metadata] difficulty (free text)
  std::vector<std::string> tags;
  double agent_timeout_sec = 600;     // [agent] timeout_sec. Default: 600
  double verifier_timeout_sec = 120;  // [verifier] timeout_sec. Default: 120
  double cpus = 1;                    // [environment] cpus. Default: 1
  uint64_t memory_mb = 512;           // [environment] memory_mb. Default: 512
  uint64_t storage_mb = 256;          // [environment] storage_mb (the workspace cap). Default: 256
  std::string image = "default";      // [environment] image. Default: "default"
  bool has_setup = false;             // environment/setup.sh exists
};

// Loads one task folder. Errors name the missing file or the bad key; unknown keys are
// appended to `warnings` ("TASK/task.toml: unknown key [x] y").
[[nodiscard]] Result<Task> LoadTask(const std::string& dir, std::vector<std::string>* warnings);

// Loads every task folder directly below `suite_dir` (sorted by name) whose name matches
// `glob` (shell wildcards; "" or "*" matches all). An empty selection is an error.
[[nodiscard]] Result<std::vector<Task>> LoadSuite(const std::string& suite_dir,
                                                  const std::string& glob,
                                                  std::vector<std::string>* warnings);

// The files below `dir` (recursively), as paths relative to it, sorted; empty when absent.
std::vector<std::string> ListFiles(const std::string& dir);

}  // namespace sinew::eval
