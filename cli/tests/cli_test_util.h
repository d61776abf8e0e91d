// Helpers for the CLI tests: run the real `sinew` binary and capture its output.
#pragma once

#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sinew/testing/subprocess.h"

namespace sinew::cli::test {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `sinew ARGS...` through /bin/sh so that stderr is captured too; `stdin_text`
// is fed to its standard input.
inline CliRun RunSinew(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::string cmd = "exec '" + testing::BinaryPath("sinew") + "'";
  for (const auto& a : args) {
    std::string quoted;
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " '" + quoted + "'";
  }
  testing::TempDir tmp("sinew-cli-in");
  std::string in_path = tmp.Sub("stdin");
  std::ofstream(in_path) << stdin_text;
  cmd += " <'" + in_path + "' 2>&1";
  testing::Subprocess proc({"/bin/sh", "-c", cmd}, {"NO_COLOR=1", "HOME=/nonexistent"});
  CliRun run;
  while (auto line = proc.ReadLine(std::chrono::seconds(120))) run.out += *line + "\n";
  run.out += proc.partial();
  int status = proc.Wait();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// Compares `actual` with the golden file cli/tests/golden/NAME; SINEW_UPDATE_GOLDEN=1
// rewrites the file instead.
inline std::string GoldenPath(const std::string& name) {
  const char* src = std::getenv("SINEW_SOURCE_DIR");
  return std::string(src ? src : ".") + "/cli/tests/golden/" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sinew::cli::test

#define EXPECT_GOLDEN(name, actual)                                                    \
  do {                                                                                 \
    const std::string golden_path_ = ::sinew::cli::test::GoldenPath(name);             \
    if (std::getenv("SINEW_UPDATE_GOLDEN")) {                                          \
      std::ofstream(golden_path_, std::ios::binary) << (actual);                       \
    }                                                                                  \
    EXPECT_EQ((actual), ::sinew::cli::test::ReadFile(golden_path_)) << golden_path_;   \
  } while (0)
