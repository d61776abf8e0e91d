#include "agent/child_reaper.h"

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sinew::sandbox {

ChildReaper& ChildReaper::Instance() {
  static ChildReaper* reaper = new ChildReaper();  // never destroyed: its thread runs until exit
  return *reaper;
}

ChildReaper::ChildReaper() : thread_([this] { Loop(); }) { thread_.detach(); }

Result<ChildReaper::Child> ChildReaper::Spawn(const std::function<void()>& in_child) {
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
  std::lock_guard<std::mutex> lock(mutex_);
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(efd);
    return Status::ResourceExhausted(std::string("fork failed: ") + std::strerror(err) +
                                     " (the process limit of this sandbox may be reached)");
  }
  if (pid == 0) {
    // A child is wholly the agent's effective user (the sandbox user): with the agent's
    // real uid it could signal the agent. Raw system calls: this thread is the child's only one.
    const long euid = syscall(SYS_geteuid), egid = syscall(SYS_getegid);
    if (syscall(SYS_setresgid, egid, egid, egid) != 0 || syscall(SYS_setresuid, euid, euid, euid) != 0) {
      _exit(126);
    }
    in_child();
    _exit(127);
  }
  children_[pid] = Entry{efd, false, 0};
  ++spawn_count_;
  spawned_.notify_all();
  return Child{pid, efd};
}

int ChildReaper::TakeStatus(pid_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = children_.find(pid);
  if (it == children_.end() || !it->second.exited) return -1;
  int status = it->second.status;
  children_.erase(it);
  return status;
}

void ChildReaper::Loop() {
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = spawn_count_;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      // No children at all: sleep until the next Spawn (or a while, for adopted orphans).
      std::unique_lock<std::mutex> lock(mutex_);
      spawned_.wait_for(lock, std::chrono::milliseconds(200), [&] { return spawn_count_ != seen; });
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = children_.find(pid);
    if (it == children_.end()) continue;  // an adopted orphan: reaped, nothing to report
    it->second.exited = true;
    it->second.status = status;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(it->second.exit_fd, &one, sizeof(one));
  }
}

}  // namespace sinew::sandbox
