#include "sinew/testing/subprocess.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace sinew::testing {

namespace {
[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::abort();
}
}  // namespace

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) Die("mkdtemp");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string BinaryPath(const std::string& name) {
  const char* dir = std::getenv("SINEW_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

Subprocess::Subprocess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) Die("pipe2");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) Die("fork");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    for (const auto& e : extra_env) putenv(const_cast<char*>(e.c_str()));
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  stdout_fd_ = fds[0];
  if (pipe2(stop_fds_, O_CLOEXEC) != 0) Die("pipe2");
  reader_ = std::thread([this] { Drain(); });
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait();
  }
  // The child's own children may hold the pipe open: stop the reader explicitly.
  if (write(stop_fds_[1], "x", 1) < 0) Die("write");
  reader_.join();
  close(stop_fds_[0]);
  close(stop_fds_[1]);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

void Subprocess::Drain() {
  while (true) {
    pollfd p[2] = {{stdout_fd_, POLLIN, 0}, {stop_fds_[0], POLLIN, 0}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p[1].revents & POLLIN) != 0) break;
    char chunk[4096];
    ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    if (n <= 0) break;
    buffer_.append(chunk, static_cast<size_t>(n));
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  eof_ = true;
  cv_.notify_all();
}

std::string Subprocess::partial() {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffer_;
}

std::optional<std::string> Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  std::string::size_type nl = std::string::npos;
  cv_.wait_until(lock, deadline, [&] {
    nl = buffer_.find('\n');
    return nl != std::string::npos || eof_;
  });
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  return line;
}

std::optional<std::string> Subprocess::WaitForLine(const std::string& needle,
                                                   std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto line = ReadLine(left);
    if (!line) return std::nullopt;
    if (line->find(needle) != std::string::npos) return line;
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int Subprocess::Wait() {
  int status = 0;
  if (pid_ <= 0) return 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

std::optional<int> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return 0;
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      pid_ = -1;
      return status;
    }
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int FreeLoopbackPort() { return RefusingPort().port(); }

RefusingPort::RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) Die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("bind");
  socklen_t len = sizeof addr;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

RefusingPort::~RefusingPort() { close(fd_); }

}  // namespace sinew::testing
