// BenchDaemon: a sinew-sandboxd started for a benchmark, with its own state directory,
// cgroup parent and port; SIGTERMed and cleaned up on destruction.
// Thread-safety: not thread-safe.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sinew/sandbox/provisioner_client.h"

extern "C" char** environ;

namespace sinew::sandbox::bench {

namespace bench_fs = std::filesystem;

class BenchDaemon {
 public:
  BenchDaemon(const std::string& bin_dir, const std::string& image_root, int port, int warm,
              const std::vector<std::string>& extra = {})
      : port_(port) {
    state_ = "/run/sinew-bench-" + std::to_string(getpid()) + "-" + std::to_string(port);
    std::vector<std::string> args = {bin_dir + "/sinew-sandboxd",
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port),
                                     "--state-dir",
                                     state_,
                                     "--cgroup-parent",
                                     "sinew-bench-" + std::to_string(port),
                                     "--image-root",
                                     image_root,
                                     "--warm-pool-size",
                                     std::to_string(warm)};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start " + args[0]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto c = sinew::sandbox::ProvisionerClient::Connect("127.0.0.1:" + std::to_string(port));
    client_ = std::move(*c);
    for (int i = 0; i < 300 && !client_->Health().ok(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~BenchDaemon() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::error_code ec;
    bench_fs::remove_all(state_, ec);
    for (const auto& h : bench_fs::directory_iterator("/sys/fs/cgroup", ec))
      rmdir((h.path() / ("sinew-bench-" + std::to_string(port_))).c_str());
  }
  sinew::sandbox::ProvisionerClient& client() { return *client_; }
  const std::string& state_dir() const { return state_; }

 private:
  int port_;
  std::string state_;
  pid_t pid_ = -1;
  std::unique_ptr<sinew::sandbox::ProvisionerClient> client_;
};


}  // namespace sinew::sandbox::bench
