#include "sandboxd/userns_holder.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

Result<UsernsHolder> UsernsHolder::Create(uint32_t host_base, uint32_t size) {
  int ready[2], hold[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(hold, O_CLOEXEC) != 0) {
    close(ready[0]);
    close(ready[1]);
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {ready[0], ready[1], hold[0], hold[1]}) close(fd);
    return Status::IOError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    close(ready[0]);
    close(hold[1]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char result = 1;
    if (setgroups(0, nullptr) == 0 && setresgid(host_base, host_base, host_base) == 0 &&
        setresuid(host_base, host_base, host_base) == 0 && unshare(CLONE_NEWUSER) == 0) {
      result = 0;
    }
    (void)!write(ready[1], &result, 1);
    char c;
    (void)!read(hold[0], &c, 1);  // until the parent closes its end (or kills us)
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  UsernsHolder holder(pid);
  char result = 1;
  ssize_t n = read(ready[0], &result, 1);
  close(ready[0]);
  close(hold[1]);  // the child keeps reading until it is killed: nothing more is sent
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
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string UsernsHolder::ns_path() const { return "/proc/" + std::to_string(pid_) + "/ns/user"; }

}  // namespace sinew::sandbox
