// Test helpers: temporary directories and child processes with a readable stdout.
// For tests and benchmarks only (they abort on setup failures rather than returning Status).
//
// Thread-safety: none; each object is used by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sinew::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sinew-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Path of a binary built by this project ($SINEW_BIN_DIR/name, or build/bin/name).
std::string BinaryPath(const std::string& name);

// A child process whose stdout is a pipe the test reads line by line; stderr is inherited.
// A thread drains the pipe into memory as the child writes, so a child that logs more
// than a pipe holds never blocks on a test that does not read it.
class Subprocess {
 public:
  // Starts argv[0] (a path) with the given arguments. Aborts if fork/exec setup fails.
  explicit Subprocess(const std::vector<std::string>& argv,
                      const std::vector<std::string>& extra_env = {});
  ~Subprocess();  // SIGKILLs and reaps the child if it is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads the next complete line (without '\n'); nullopt on timeout or end of output.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Reads lines until one contains `needle`; returns that line, nullopt on timeout/EOF.
  std::optional<std::string> WaitForLine(const std::string& needle,
                                         std::chrono::milliseconds timeout);
  // Everything read so far that did not form a complete line.
  std::string partial();
  void Signal(int sig);
  // Waits for exit; returns the wait status (as from waitpid).
  int Wait();
  // Waits up to `timeout` for exit; the wait status, or nullopt while it still runs.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  // Started and not yet waited for (it may have exited since).
  bool running() const { return pid_ > 0; }

 private:
  void Drain();  // the reader thread

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stop_fds_[2] = {-1, -1};  // written to end the reader
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string buffer_;  // guarded by mutex_
  bool eof_ = false;    // guarded by mutex_
};

// Returns a TCP port on 127.0.0.1 that was free a moment ago.
int FreeLoopbackPort();

// A TCP port on 127.0.0.1 that refuses every connection for as long as this object
// lives: it holds a socket bound to the port without listening, so no other process can
// take the port meanwhile (a closed server's port can be, under parallel tests).
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace sinew::testing
