// UsernsHolder: creates a sandbox's user namespace *owned by the sandbox's own host uid*
// and keeps it alive until runc has joined it.
//
// Why not let runc create it: the kernel charges per-user limits (inotify instances and
// watches, the message-queue budget, ...) at every level of the user-namespace tree, and
// at the host's level to the uid that *owns* the namespace. A namespace made by runc is
// owned by root, so every sandbox would share root's budget (one sandbox holding 128
// inotify instances starved all others and the host's root). The holder drops to the
// sandbox's first host uid before unshare(CLONE_NEWUSER), so each sandbox is charged on
// its own account.
//
// Lifetime: the holder lives until this object is destroyed, and never longer than the
// daemon: it keeps none of the daemon's descriptors, and its only way to wait is a pipe
// whose other end only the daemon holds (close-on-exec), so the daemon's death, even by
// SIGKILL, ends it; the parent-death signal is a second line.
//
// Thread-safety: not thread-safe; one per sandbox start. The thread that creates it must
// outlive it (the parent-death signal follows that thread, not the process).
#pragma once

#include <sys/types.h>

#include <string>

#include "sinew/status.h"

namespace sinew::sandbox {

class UsernsHolder {
 public:
  // Forks a holder running as host uid/gid `host_base`, in a new user namespace mapping
  // ids [0, size) to [host_base, host_base + size).
  [[nodiscard]] static Result<UsernsHolder> Create(uint32_t host_base, uint32_t size);

  UsernsHolder(UsernsHolder&& o) noexcept : pid_(o.pid_), hold_fd_(o.hold_fd_) {
    o.pid_ = -1;
    o.hold_fd_ = -1;
  }
  UsernsHolder& operator=(UsernsHolder&&) = delete;
  UsernsHolder(const UsernsHolder&) = delete;
  ~UsernsHolder();  // kills and reaps the holder; the namespace lives on in its members

  // The namespace to name in the OCI config ("/proc/<pid>/ns/user").
  std::string ns_path() const;

 private:
  UsernsHolder(pid_t pid, int hold_fd) : pid_(pid), hold_fd_(hold_fd) {}
  pid_t pid_ = -1;
  int hold_fd_ = -1;  // the holder waits until this end closes
};

}  // namespace sinew::sandbox
