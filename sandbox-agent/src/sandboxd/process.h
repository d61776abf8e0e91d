// RunProcess: runs a helper program (runc, ldd) to completion with a timeout.
//
// Thread-safety: thread-safe; each call waits for its own child by pid (the daemon
// never calls waitpid(-1)).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::sandbox {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string output;  // stdout and stderr, unless they went to a file
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null. Its stdout and stderr go to
// `output_file` (appended) when not empty, otherwise they are captured in `output`.
// Kills it and fails with kDeadlineExceeded after `timeout`. The descriptors in
// `pass_fds` are handed to the child as 3, 4, ... (for runc's --preserve-fds); the
// caller keeps its own copies.
[[nodiscard]] Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                               std::chrono::milliseconds timeout,
                                               const std::string& output_file = {},
                                               const std::vector<int>& pass_fds = {});

}  // namespace sinew::sandbox
