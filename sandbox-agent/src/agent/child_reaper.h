// ChildReaper: the one place in the agent that calls waitpid. Inside a container the
// agent is PID 1, so orphans of the commands it runs become its children; the reaper
// collects them all and hands the exit status of the processes it spawned to their
// owners through an eventfd.
//
// Thread-safety: all methods are thread-safe. One instance per process (Instance()).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "sinew/status.h"

namespace sinew::sandbox {

class ChildReaper {
 public:
  struct Child {
    pid_t pid = -1;
    int exit_fd = -1;  // eventfd, readable once the child has exited; owned by the caller
  };

  static ChildReaper& Instance();

  // Forks; the child takes the agent's effective uid and gid as its real, effective and
  // saved ids (exit status 126 if it cannot), then runs `in_child`, which may only use
  // async-signal-safe calls and must not return (end it with execve or _exit).
  [[nodiscard]] Result<Child> Spawn(const std::function<void()>& in_child);
  // The wait status of an exited child (after exit_fd became readable); forgets it.
  // Returns -1 if the child has not exited.
  int TakeStatus(pid_t pid);

  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

 private:
  struct Entry {
    int exit_fd = -1;
    bool exited = false;
    int status = 0;
  };
  ChildReaper();
  void Loop();

  std::mutex mutex_;
  std::condition_variable spawned_;  // signalled on each Spawn, wakes an idle reaper
  std::map<pid_t, Entry> children_;  // guarded by mutex_
  uint64_t spawn_count_ = 0;         // guarded by mutex_
  std::thread thread_;
};

}  // namespace sinew::sandbox
