#include "sandboxd/userns_holder.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

namespace sinew::sandbox {
namespace {

Status WriteProcFile(pid_t pid, const char* name, const std::string& content) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  std::ofstream out(path);
  out << content;
  out.flush();
  if (!out) return Status::IOError("cannot write " + path);
  return Status::Ok();
}

// Closes every descriptor from 3 up except `keep_a` and `keep_b` (async-signal-safe).
void CloseAllBut(int keep_a, int keep_b) {
  const int lo = std::min(keep_a, keep_b), hi = std::max(keep_a, keep_b);
  if (lo > 3) close_range(3, lo - 1, 0);
  if (hi > lo + 1) close_range(lo + 1, hi - 1, 0);
  close_range(hi + 1, UINT_MAX, 0);
}

// The holder's body, in the forked child: only async-signal-safe calls. Never returns.
[[noreturn]] void RunHolder(pid_t daemon, int ready, int hold, uint32_t host_base) {
  // A fork that never execs keeps a copy of every descriptor the daemon had open (its
  // listening socket, other holders' pipes): drop them all, so that nothing outlives the
  // daemon through us and no other holder waits on a pipe end we hold.
  CloseAllBut(ready, hold);
  char result = 1;
  if (setgroups(0, nullptr) == 0 && setresgid(host_base, host_base, host_base) == 0 &&
      setresuid(host_base, host_base, host_base) == 0 && unshare(CLONE_NEWUSER) == 0) {
    result = 0;
  }
  // After the credential change: the kernel clears the parent-death signal on one. The
  // parent is the daemon thread that forked us, which waits for runc before it lets go.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != daemon) _exit(1);  // it died before the line above
  (void)!write(ready, &result, 1);
  char c;
  (void)!read(hold, &c, 1);  // end of file once the daemon closes its end, or dies
  _exit(0);
}

}  // namespace

Result<UsernsHolder> UsernsHolder::Create(uint32_t host_base, uint32_t size) {
  int ready[2], hold[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(hold, O_CLOEXEC) != 0) {
    close(ready[0]);
    close(ready[1]);
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t daemon = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {ready[0], ready[1], hold[0], hold[1]}) close(fd);
    return Status::IOError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) RunHolder(daemon, ready[1], hold[0], host_base);
  close(ready[1]);
  close(hold[0]);
  UsernsHolder holder(pid, hold[1]);
  char result = 1;
  ssize_t n = read(ready[0], &result, 1);
  close(ready[0]);
  if (n != 1 || result != 0) {
    return Status::Internal("could not create a user namespace owned by uid " +
                            std::to_string(host_base) + " (are user namespaces enabled?)");
  }
  std::string map = "0 " + std::to_string(host_base) + " " + std::to_string(size) + "\n";
  SINEW_RETURN_IF_ERROR(WriteProcFile(pid, "uid_map", map));
  SINEW_RETURN_IF_ERROR(WriteProcFile(pid, "gid_map", map));
  return holder;
}

UsernsHolder::~UsernsHolder() {
  if (pid_ <= 0) return;
  if (hold_fd_ >= 0) close(hold_fd_);
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string UsernsHolder::ns_path() const { return "/proc/" + std::to_string(pid_) + "/ns/user"; }

}  // namespace sinew::sandbox
