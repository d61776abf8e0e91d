#include "sandboxd/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace sinew::sandbox {

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout,
                                 const std::string& output_file,
                                 const std::vector<int>& pass_fds) {
  if (argv.empty()) return Status::InvalidArgument("RunProcess: empty argv");
  // Copies above the target numbers, so that dup2 never meets an fd already in place
  // (which would keep its close-on-exec flag).
  std::vector<int> copies;
  for (int fd : pass_fds) {
    int c = fcntl(fd, F_DUPFD_CLOEXEC, 3 + static_cast<int>(pass_fds.size()));
    if (c < 0) {
      for (int o : copies) close(o);
      return Status::IOError(std::string("dup: ") + std::strerror(errno));
    }
    copies.push_back(c);
  }
  struct CloseCopies {
    std::vector<int>& fds;
    ~CloseCopies() {
      for (int fd : fds) close(fd);
    }
  } close_copies{copies};
  int pipe_fds[2] = {-1, -1};
  int out_fd = -1;
  if (output_file.empty()) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
      return Status::IOError(std::string("pipe: ") + std::strerror(errno));
    out_fd = pipe_fds[1];
  } else {
    out_fd = open(output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (out_fd < 0) return Status::IOError("open " + output_file + ": " + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  for (size_t i = 0; i < copies.size(); ++i) {
    posix_spawn_file_actions_adddup2(&actions, copies[i], 3 + static_cast<int>(i));
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_fd);
  if (rc != 0) {
    if (pipe_fds[0] >= 0) close(pipe_fds[0]);
    return Status::FailedPrecondition("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false;
  bool killed = false;
  int read_fd = pipe_fds[0];
  char buf[4096];
  while (!exited || read_fd >= 0) {
    pollfd pfds[2] = {{read_fd, POLLIN, 0}, {exited ? -1 : pidfd, POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      continue;
    }
    if (left.count() <= 0 && killed) break;
    int n = poll(pfds, 2, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (read_fd >= 0 && (pfds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = read(read_fd, buf, sizeof(buf));
      if (got > 0) {
        if (result.output.size() < (1 << 20)) result.output.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(read_fd);
        read_fd = -1;
      }
    }
    if (!exited && (pidfd < 0 || (pfds[1].revents & POLLIN))) {
      int status = 0;
      pid_t w = waitpid(pid, &status, pidfd < 0 ? WNOHANG : 0);
      if (w == pid) {
        exited = true;
        result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      } else if (pidfd < 0) {
        usleep(1000);
      }
    }
  }
  if (read_fd >= 0) close(read_fd);
  if (pidfd >= 0) close(pidfd);
  if (!exited) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  if (killed) {
    return Status::DeadlineExceeded(argv[0] + " did not finish within " +
                                    std::to_string(timeout.count()) + " ms: " + result.output);
  }
  return result;
}

}  // namespace sinew::sandbox
