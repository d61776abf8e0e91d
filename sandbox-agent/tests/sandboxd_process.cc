#include "sandboxd_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace sinew::sandbox::testing {

namespace fs = std::filesystem;

namespace {

std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

int FreePort() {
  // Distinct enough across parallel tests: derived from pid and a random draw, in a
  // range the kernel does not hand out as ephemeral ports.
  std::mt19937 rng(static_cast<unsigned>(getpid()) ^ std::random_device{}());
  return 20000 + static_cast<int>(rng() % 10000);
}

bool PortOpen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::string SandboxdProcess::BinDir() {
  const char* dir = std::getenv("SINEW_BIN_DIR");
  return dir != nullptr ? dir : "build/bin";
}

SandboxdProcess::SandboxdProcess() {
  std::string tag =
      std::to_string(getpid()) + "-" + std::to_string(std::random_device{}() % 100000);
  state_dir_ = "/run/sinew-test-" + tag;
  cgroup_parent_ = "sinew-test-" + tag;
  // Daemons of tests that run side by side get disjoint uid ranges (64 sandboxes each).
  userns_uid_base_ = 1000000000u + (std::random_device{}() % 600) * 64u * 65536u;
}

SandboxdProcess::~SandboxdProcess() {
  if (pid_ > 0) Kill(SIGTERM);
  std::error_code ec;
  fs::remove_all(state_dir_, ec);
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    fs::path p = h.path() / cgroup_parent_;
    if (fs::exists(p)) rmdir(p.c_str());
  }
  rmdir(("/sys/fs/cgroup/" + cgroup_parent_).c_str());  // cgroup v2
}

void SandboxdProcess::Start(const std::vector<std::string>& extra_flags, const GrpcTlsOptions& client_tls) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool started = false;
    TryStart(FreePort(), extra_flags, client_tls, &started);
    if (started || ::testing::Test::HasFatalFailure()) return;
  }
  FAIL() << "sinew-sandboxd did not start (see its stderr above)";
}

void SandboxdProcess::Restart(const std::vector<std::string>& extra_flags, const GrpcTlsOptions& client_tls) {
  bool started = false;
  TryStart(port_, extra_flags, client_tls, &started);
  if (!started && !::testing::Test::HasFatalFailure()) {
    FAIL() << "sinew-sandboxd did not start again on port " << port_ << " (see its stderr above)";
  }
}

void SandboxdProcess::TryStart(int port, const std::vector<std::string>& extra_flags,
                               const GrpcTlsOptions& client_tls, bool* started) {
  port_ = port;
  std::vector<std::string> args = {BinDir() + "/sinew-sandboxd",
                                   "--listen",
                                   "127.0.0.1:" + std::to_string(port_),
                                   "--state-dir",
                                   state_dir_,
                                   "--cgroup-parent",
                                   cgroup_parent_,
                                   "--userns-uid-base",
                                   std::to_string(userns_uid_base_)};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ASSERT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0) << argv[0];
  // Wait for the port first: a gRPC channel that fails early backs off for seconds.
  for (int i = 0; i < 3000 && !PortOpen(port_); ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto client =
      ProvisionerClient::Connect("127.0.0.1:" + std::to_string(port_), std::chrono::seconds(120), client_tls);
  ASSERT_TRUE(client.ok());
  client_ = std::move(*client);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (client_->Health().ok()) {
      *started = true;
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) break;  // exited: port taken, or a real failure
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

void SandboxdProcess::Kill(int signal) {
  if (pid_ <= 0) return;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::vector<std::string> SandboxdProcess::RuncContainers() const {
  std::istringstream in(Capture("runc --root " + state_dir_ + "/runc list -q 2>/dev/null"));
  std::vector<std::string> ids;
  std::string id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::vector<std::string> SandboxdProcess::Cgroups() const {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator("/sys/fs/cgroup/" + cgroup_parent_, ec)) {  // cgroup v2
    if (e.is_directory()) names.insert("v2:" + e.path().filename().string());
  }
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    for (const auto& e : fs::directory_iterator(h.path() / cgroup_parent_, ec)) {
      if (e.is_directory())
        names.insert(h.path().filename().string() + ":" + e.path().filename().string());
    }
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> SandboxdProcess::ParentCgroups() const {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3)), head(line);
    std::string fstype, field, mount_point;
    rest >> fstype;
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    for (int k = 0; k < 5 && head >> field; ++k) mount_point = field;
    std::error_code ec;
    if (fs::exists(mount_point + "/" + cgroup_parent_, ec)) found.push_back(mount_point + "/" + cgroup_parent_);
  }
  return found;
}

std::vector<std::string> SandboxdProcess::SandboxDirs() const {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/sandboxes", ec))
    dirs.push_back(e.path().filename());
  return dirs;
}

std::vector<std::string> SandboxdProcess::Mounts() const {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // The daemon's own agent tmpfs stays while it runs; sandboxes may leave nothing.
    if (line.find(state_dir_ + "/") != std::string::npos &&
        line.find(" " + state_dir_ + "/agent ") == std::string::npos) {
      found.push_back(line);
    }
  }
  return found;
}

v1::ExecuteResult Bash(SandboxClient& client, const std::string& command, int timeout_s) {
  boost::json::object input{{"command", command}, {"timeout", timeout_s}};
  auto r = client.Execute("bash", boost::json::serialize(input));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : v1::ExecuteResult();
}

bool ProcessAlive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  if (content.empty()) return false;
  auto paren = content.rfind(')');
  return paren == std::string::npos || paren + 2 >= content.size() || content[paren + 2] != 'Z';
}

v1::Resources SmallResources() {
  v1::Resources r;
  r.set_memory_limit_bytes(256ull << 20);
  r.set_workspace_bytes(64ull << 20);
  r.set_pids_limit(128);
  r.set_cpu_millicores(1000);
  return r;
}

GatedRunc::GatedRunc() : dir_((fs::temp_directory_path() / ("sinew-gated-runc-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}() % 100000))).string()) {
  fs::create_directories(dir_);
  std::string runc = "runc";
  for (const char* candidate : {"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"}) {
    if (access(candidate, X_OK) == 0) {
      runc = candidate;
      break;
    }
  }
  std::ofstream(path()) << "#!/bin/sh\n"
                        << "for a in \"$@\"; do\n"
                        << "  if [ \"$a\" = run ]; then\n"
                        << "    echo \"$*\" >> '" << dir_ << "/runs'\n"
                        << "    while [ ! -e '" << dir_ << "/gate' ]; do\n"
                        << "      [ -d '" << dir_ << "' ] || exit 1\n"
                        << "      sleep 0.02\n"
                        << "    done\n"
                        << "    break\n"
                        << "  fi\n"
                        << "done\n"
                        << "exec " << runc << " \"$@\"\n";
  fs::permissions(path(), fs::perms::owner_all);
}

GatedRunc::~GatedRunc() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string GatedRunc::path() const { return dir_ + "/runc"; }

void GatedRunc::Open() const { std::ofstream(dir_ + "/gate") << "open\n"; }

std::vector<std::string> GatedRunc::Runs() const {
  std::vector<std::string> runs;
  std::ifstream in(dir_ + "/runs");
  for (std::string line; std::getline(in, line);) runs.push_back(line);
  return runs;
}

}  // namespace sinew::sandbox::testing
