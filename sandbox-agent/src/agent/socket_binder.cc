#include "agent/socket_binder.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sinew::sandbox {
namespace {

constexpr char kRebind = 'R';
constexpr size_t kMaxIdentityBytes = 1024;

std::string ListenPath(const std::string& socket_path) {
  return socket_path.substr(0, socket_path.rfind('/') + 1) + "listen";
}

// Drops every capability; the uid stays 0 (the owner of the socket's directory).
void DropCapabilities() {
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  syscall(SYS_capset, &header, data);
}

// Reads the whole `listen` file once it exists (polled: it is written from the host,
// which no notification inside the sandbox sees).
std::string AwaitListenFile(const std::string& path) {
  for (;;) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      std::string text(kMaxIdentityBytes, '\0');
      ssize_t n = read(fd, text.data(), text.size());
      close(fd);
      // The host writes it whole under another name and renames it into place.
      if (n > 0) {
        text.resize(static_cast<size_t>(n));
        return text;
      }
    }
    timespec pause{0, 2'000'000};
    nanosleep(&pause, nullptr);
  }
}

std::string QuietPath(const std::string& socket_path) {
  return socket_path.substr(0, socket_path.rfind('/') + 1) + "quiet";
}

int BindAt(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof(addr.sun_path)) return -1;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  chmod(path.c_str(), 0600);
  return fd;
}

// Sends `text` with `fd` attached (-1: none).
bool SendWithFd(int channel, std::string_view text, int fd) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    if (sendmsg(channel, &msg, MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

[[noreturn]] void BinderMain(int channel, const std::string& socket_path) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_DUMPABLE, 0);
  int devnull = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(devnull, fd);
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != channel) close(fd);
  }
  DropCapabilities();
  const std::string listen_path = ListenPath(socket_path);
  for (;;) {
    char cmd = 0;
    ssize_t n = recv(channel, &cmd, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0);  // the agent is gone
    if (cmd != kRebind) continue;
    // The host removed the socket file when it asked the agent to close; a lookup makes
    // gVisor see that and let go of the host socket it kept for the path. Then the host
    // is told the agent is quiet.
    struct stat st;
    (void)!stat(socket_path.c_str(), &st);
    int quiet = open(QuietPath(socket_path).c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (quiet >= 0) close(quiet);
    const std::string identity = AwaitListenFile(listen_path);
    int fd = BindAt(socket_path);
    SendWithFd(channel, fd >= 0 ? identity : std::string_view("!bind failed"), fd);
    if (fd >= 0) close(fd);
  }
}

}  // namespace

Result<AgentIdentity> ParseIdentity(std::string_view text) {
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos || nl == 0)
    return Status::InvalidArgument("no sandbox id in the identity");
  AgentIdentity id;
  id.sandbox_id = std::string(text.substr(0, nl));
  std::string_view rest = text.substr(nl + 1);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  if (rest.empty() || rest.find('\n') != std::string_view::npos) {
    return Status::InvalidArgument("no secret in the identity");
  }
  id.secret = std::string(rest);
  return id;
}

Result<SocketBinder> SocketBinder::Start(const std::string& socket_path) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::IOError(std::string("socketpair: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(pair[0]);
    close(pair[1]);
    return Status::IOError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(pair[0]);
    BinderMain(pair[1], socket_path);
  }
  close(pair[1]);
  return SocketBinder(UniqueFd(pair[0]));
}

Result<std::pair<UniqueFd, AgentIdentity>> SocketBinder::Rebind() {
  const char cmd = kRebind;
  if (send(channel_.get(), &cmd, 1, MSG_NOSIGNAL) != 1) {
    return Status::IOError(std::string("the socket binder is gone: ") + std::strerror(errno));
  }
  std::string text(kMaxIdentityBytes, '\0');
  iovec iov{text.data(), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(channel_.get(), &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return Status::IOError("the socket binder is gone");
  text.resize(static_cast<size_t>(n));
  UniqueFd fd;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c), sizeof(int));
      fd = UniqueFd(got);
    }
  }
  if (fd.get() < 0) return Status::IOError("the socket binder could not bind: " + text);
  SINEW_ASSIGN_OR_RETURN(AgentIdentity identity, ParseIdentity(text));
  return std::make_pair(std::move(fd), std::move(identity));
}

}  // namespace sinew::sandbox
