// sinew-sandbox-agent: serves the Sandbox gRPC service on a unix socket. Runs as PID 1
// of a sandbox container (see docs/sandbox.md); also runs on a host for tests.
//
// In a sandbox the socket is not made here: the provisioner binds it on the host, in a
// directory the sandbox cannot see or write, and hands the bound descriptor over
// (--listen-fd); the agent listens and accepts on it, so nothing inside the sandbox can
// redirect the host's connections. The per-sandbox secret comes through an inherited
// pipe (--secret-fd), read once and closed. Under gVisor (--socket with --drop-to-uid)
// it binds its socket itself, as root before it drops its privileges, and on SIGUSR1
// closes every socket for a checkpoint and serves again afterwards (socket_binder.h).
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <signal.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/agent_auth.h"
#include "agent/agent_service.h"
#include "agent/child_reaper.h"
#include "agent/socket_binder.h"
#include "agent/tools.h"

namespace {

// Reads the secret from an inherited pipe and closes it.
std::string ReadSecret(int fd) {
  std::string secret;
  char buf[256];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    secret.append(buf, static_cast<size_t>(n));
    if (secret.size() > 4096) break;
  }
  close(fd);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == ' ')) secret.pop_back();
  return secret;
}

// gVisor mode, as root: binds the socket in a directory only root can write, readable
// and writable by root alone. Returns the bound socket, or -1 (after printing why).
int BindSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof(addr.sun_path)) return -1;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::cerr << "sinew-sandbox-agent: bind " << path << ": " << strerror(errno) << "\n";
    return -1;
  }
  chmod(path.c_str(), 0600);
  return fd;
}

// Started as root: drops every capability (bounding set included) and takes real and
// saved uid `agent_uid` with effective uid `uid` (all gids `gid`), before any thread
// starts. What the agent creates belongs to `uid`, and it may still make its commands
// wholly `uid` (an effective id may become the real one), but no process of `uid` may
// signal it (kill needs the sender's real or effective uid to match the target's real or
// saved uid) or trace it (ptrace needs all three to match). Returns false after printing why.
bool DropPrivileges(uid_t uid, gid_t gid, uid_t agent_uid) {
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  uid_t r = 0, e = 0, s = 0;
  if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
      setresuid(agent_uid, uid, agent_uid) != 0 || getresuid(&r, &e, &s) != 0 || r != agent_uid ||
      e != uid || s != agent_uid) {
    std::cerr << "sinew-sandbox-agent: cannot take uids " << agent_uid << "/" << uid << ": "
              << strerror(errno) << "\n";
    return false;
  }
  return true;
}

// Accepts connections on `listen_fd` and hands each one to the gRPC server, until
// `wake_fd` becomes readable. (gVisor does not wake an accept() blocked on a socket
// that was shut down, so the wait is a poll on both.)
void AcceptLoop(int listen_fd, int wake_fd, grpc::Server* server) {
  for (;;) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) {
      if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return;
      continue;
    }
    int conn = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    grpc::AddInsecureChannelFromFd(server, conn);
  }
}

// Socket descriptors this process holds, but `except` and `except2`.
int OpenSockets(int except, int except2) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == std::to_string(except) || name == std::to_string(except2)) continue;
    std::error_code lec;
    const std::string target = std::filesystem::read_symlink(it->path(), lec).string();
    if (!lec && target.rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

// What the signal thread and the serving loop share.
struct Serving {
  std::mutex mu;
  grpc::Server* server = nullptr;  // the one serving now; null between two
  int wake_fd = -1;                // wakes its acceptor
  bool stop = false;               // SIGTERM/SIGINT: end
  bool rebind = false;             // SIGUSR1 (gVisor): close every socket, then bind anew

  // REQUIRES: mu held. Ends the current server's serving (its Wait returns).
  void EndServing() {
    if (server == nullptr) return;
    if (wake_fd >= 0) (void)!write(wake_fd, "x", 1);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sinew-sandbox-agent: tools for a model, served on a unix socket"};
  std::string socket_path;
  sinew::sandbox::ToolConfig config;
  std::string workspace = config.workspace.string();
  int listen_fd = -1;
  int secret_fd = -1;
  std::string sandbox_id;
  auto* socket_opt = app.add_option("--socket", socket_path, "unix socket to listen on");
  app.add_option("--listen-fd", listen_fd,
                 "an inherited, bound unix socket to listen on (instead of --socket)")
      ->excludes(socket_opt);
  app.add_option("--secret-fd", secret_fd,
                 "an inherited pipe holding this sandbox's secret; calls must then carry it");
  std::string secret_env;
  app.add_option("--secret-env", secret_env,
                 "an environment variable holding the secret (read, then removed; gVisor mode)");
  int drop_uid = -1, drop_gid = -1;
  int agent_uid = -1;
  app.add_option("--drop-to-uid", drop_uid,
                 "started as root: bind --socket (if given), drop every capability and take "
                 "this effective uid (the commands' uid) with --agent-uid as real and saved uid");
  app.add_option("--drop-to-gid", drop_gid, "the gid for --drop-to-uid");
  app.add_option("--agent-uid", agent_uid, "the agent's own real and saved uid for --drop-to-uid");
  app.add_option("--sandbox-id", sandbox_id, "this sandbox's id (bound into each call's proof)");
  rlim_t max_open_files = 4096;
  app.add_option("--max-open-files", max_open_files, "RLIMIT_NOFILE of the agent and its commands")
      ->capture_default_str();
  rlim_t max_processes = 0;
  app.add_option("--max-processes", max_processes,
                 "the sandbox's process limit (gVisor, enforced by its kernel): its commands' "
                 "RLIMIT_NPROC is this less the agent's own threads; 0: unchanged")
      ->check(CLI::Range(rlim_t{0}, rlim_t{1} << 20));
  app.add_option("--workspace", workspace, "workspace directory")->capture_default_str();
  app.add_option("--max-output-bytes", config.max_output_bytes, "cap of a tool's output")
      ->check(CLI::Range(size_t{64}, size_t{16} << 20))
      ->capture_default_str();
  app.add_option("--default-timeout", config.default_timeout_s,
                 "bash timeout in seconds when none is given")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--max-timeout", config.max_timeout_s, "largest bash timeout accepted, seconds")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--max-transfer-bytes", config.max_transfer_bytes,
                 "largest file ReadFile sends and WriteFile takes")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  config.workspace = workspace;
  if (socket_path.empty() && listen_fd < 0) {
    std::cerr << "sinew-sandbox-agent: give --socket PATH or --listen-fd N\n";
    return 2;
  }
  std::string secret;
  if (!secret_env.empty()) {
    char* v = getenv(secret_env.c_str());
    if (v != nullptr) {
      secret = v;
      // Wipe it where it lives (the initial environment, which /proc/1/environ shows),
      // then drop it: neither the commands it runs nor a reader of /proc see it.
      memset(v, 'x', strlen(v));
    }
    unsetenv(secret_env.c_str());
  }
  std::optional<sinew::sandbox::SocketBinder> binder;
  if (drop_uid >= 0) {
    if (drop_gid < 0 || agent_uid < 0 || agent_uid == drop_uid) {
      std::cerr << "sinew-sandbox-agent: --drop-to-uid needs --drop-to-gid and another --agent-uid\n";
      return 2;
    }
    if (!socket_path.empty()) {  // bound as root, before the drop
      listen_fd = BindSocket(socket_path);
      if (listen_fd < 0) return 1;
      // gVisor mode: the root helper that binds the socket again around a checkpoint.
      auto started = sinew::sandbox::SocketBinder::Start(socket_path);
      if (!started.ok()) {
        std::cerr << "sinew-sandbox-agent: " << started.status().ToString() << "\n";
        return 1;
      }
      binder.emplace(std::move(*started));
      socket_path.clear();
    }
    if (!DropPrivileges(static_cast<uid_t>(drop_uid), static_cast<gid_t>(drop_gid),
                        static_cast<uid_t>(agent_uid))) {
      return 1;
    }
  }
  if (secret_fd >= 0) {
    secret = ReadSecret(secret_fd);
    if (secret.empty()) {
      std::cerr << "sinew-sandbox-agent: --secret-fd gave no secret\n";
      return 2;
    }
  }
  // The inherited socket must not leak into the commands the tools run.
  if (listen_fd >= 0 && fcntl(listen_fd, F_SETFD, FD_CLOEXEC) != 0) {
    std::cerr << "sinew-sandbox-agent: --listen-fd " << listen_fd << " is not open\n";
    return 2;
  }

  // Not dumpable: the commands it runs cannot open /proc/1/fd/* or ptrace it (their uid
  // is its effective uid).
  prctl(PR_SET_DUMPABLE, 0);
  // Limits every command inherits (lowering needs no privilege): no core dumps, and at
  // most --max-open-files descriptors.
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_max > max_open_files) {
    files.rlim_cur = files.rlim_max = max_open_files;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  // SIGTERM/SIGINT are handled by a thread (as PID 1 they would otherwise be ignored);
  // so is SIGUSR1, the host's request to close every socket before a checkpoint (gVisor
  // mode: only the host can send it, through runsc; the sandbox user cannot signal the agent).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  (void)sinew::sandbox::ChildReaper::Instance();

  sinew::sandbox::ToolRegistry registry(config);
  sinew::sandbox::AgentService service(registry, sinew::sandbox::AgentAuth(sandbox_id, secret), config);
  if (listen_fd < 0) {
    std::error_code ec;
    std::filesystem::remove(socket_path, ec);
  }
  // Builds a server on the socket (the first time also on --socket), and starts accepting
  // on the inherited or rebound descriptor.
  auto build = [&]() -> std::unique_ptr<grpc::Server> {
    grpc::ServerBuilder builder;
    if (listen_fd < 0) builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.SetMaxSendMessageSize(64 << 20);
    builder.RegisterService(&service);
    return builder.BuildAndStart();
  };
  std::unique_ptr<grpc::Server> server = build();
  if (!server) {
    std::cerr << "sinew-sandbox-agent: cannot listen on " << socket_path << "\n";
    return 1;
  }
  if (listen_fd >= 0) {
    if (listen(listen_fd, 64) != 0) {
      std::cerr << "sinew-sandbox-agent: listen on fd " << listen_fd << ": " << strerror(errno) << "\n";
      return 1;
    }
  } else {
    chmod(socket_path.c_str(), 0660);
  }
  if (max_processes > 0) {
    // The sandbox's process limit covers its agent, as the pids cgroup does under runc.
    // The limit counts the tasks of the sandbox user's real uid, which is not the agent's:
    // its own threads (those it has once serving) are taken off the limit its commands inherit.
    std::error_code ec;
    rlim_t own = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++own;
    }
    const rlim_t limit = max_processes > own ? max_processes - own : 1;
    rlimit procs{limit, limit};
    if (setrlimit(RLIMIT_NPROC, &procs) != 0) {
      std::cerr << "sinew-sandbox-agent: cannot set RLIMIT_NPROC: " << strerror(errno) << "\n";
      return 1;
    }
  }
  // Serving: nothing more goes to the host's log file, and the descriptors that name it
  // are gone, so no process of the sandbox can reach it in any way.
  if (listen_fd >= 0) {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      close(devnull);
    }
  }
  Serving serving;
  std::thread([&] {
    for (;;) {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::lock_guard<std::mutex> lock(serving.mu);
      if (sig == SIGUSR1) {
        if (!binder || serving.stop || serving.rebind) continue;
        serving.rebind = true;
      } else {
        serving.stop = true;
        if (serving.server == nullptr) _exit(0);  // between two servers: nothing to end
      }
      serving.EndServing();
    }
  }).detach();
  for (;;) {
    int wake[2];
    if (pipe2(wake, O_CLOEXEC) != 0) return 1;
    std::thread acceptor;
    if (listen_fd >= 0) acceptor = std::thread(AcceptLoop, listen_fd, wake[0], server.get());
    {
      std::lock_guard<std::mutex> lock(serving.mu);
      serving.server = server.get();
      serving.wake_fd = wake[1];
      if (serving.stop || serving.rebind) serving.EndServing();
    }
    server->Wait();
    bool rebind = false;
    {
      std::lock_guard<std::mutex> lock(serving.mu);
      serving.server = nullptr;
      serving.wake_fd = -1;
      rebind = serving.rebind && !serving.stop;
    }
    (void)!write(wake[1], "x", 1);
    if (acceptor.joinable()) acceptor.join();
    close(wake[0]);
    close(wake[1]);
    if (!rebind) break;
    // A checkpoint is coming: no host socket may be left (gVisor cannot save one). The
    // connections go first (as the server is destroyed), then the listening socket; the
    // binder then tells the host the agent is quiet (socket_binder.h).
    server.reset();
    for (int i = 0; i < 1000 && OpenSockets(binder->channel_fd(), listen_fd) > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    close(listen_fd);
    listen_fd = -1;
    auto next = binder->Rebind();
    if (!next.ok()) _exit(1);
    listen_fd = next->first.release();
    service.SetAuth(sinew::sandbox::AgentAuth(next->second.sandbox_id, next->second.secret));
    server = build();
    if (!server || listen(listen_fd, 64) != 0) _exit(1);
    std::lock_guard<std::mutex> lock(serving.mu);
    serving.rebind = false;
  }
  // No static destructor runs: the server's threads may still be winding down, and an
  // agent that never exits leaves its sandbox running with nothing serving it.
  _exit(0);
}
