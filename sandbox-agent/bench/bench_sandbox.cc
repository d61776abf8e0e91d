// bench_sandbox: provision-to-ready latency (cold and from the warm pool) next to a bare
// `runc run` of /bin/true on the same machine in the same run, and the Execute round
// trip of `echo` next to a local fork/exec of the same command. Then the runtimes side
// by side: cold start and a system-call-heavy command (200,000 one-byte reads and writes
// with dd) under runc and gVisor's runsc, against the same command run bare on the host.
// Prints ratios.
//
//   bench_sandbox [--iterations N] [--exec-iterations M] [--image-root DIR] [--no-runsc]
// Needs root, runc and the default image (sandbox-agent/image/build-image.sh).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "sandboxd/oci_spec.h"
#include "sandboxd/process.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"

#include "bench_daemon.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using sinew::sandbox::bench::BenchDaemon;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Stats {
  double p50 = 0, p99 = 0;
};

Stats Percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.50), at(0.99)};
}

// The daemon's default shape, which has a warm pool from the start.
sinew::v1::Resources Shape(const std::string& runtime = "") {
  sinew::v1::Resources r;
  r.set_runtime(runtime);
  return r;
}

constexpr const char* kSyscallHeavy = "dd if=/dev/zero of=/dev/null bs=1 count=100000 2>/dev/null; echo done";

// Wall time of `command` run by bash on the host.
double LocalCommand(const char* command) {
  const char* argv[] = {"bash", "-c", command, nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  auto start = Clock::now();
  pid_t pid;
  posix_spawn(&pid, "/bin/bash", &fa, nullptr, const_cast<char* const*>(argv), environ);
  waitpid(pid, nullptr, 0);
  posix_spawn_file_actions_destroy(&fa);
  return Ms(Clock::now() - start);
}

struct RuntimeFigures {
  Stats cold;
  Stats syscalls;
  bool ok = false;
};

// Cold provisions and the system-call-heavy command in one runtime.
RuntimeFigures MeasureRuntime(const std::string& bin_dir, const std::string& image_root, int port,
                              const std::string& runtime, int n, int runs);


// `runc run` of /bin/true (create, start, wait, delete), or with `detach` a start-only
// `runc run --detach` of a sleeping container (deleted outside the measurement).
std::vector<double> BareRunc(const std::string& rootfs, int n, bool detach) {
  std::string dir = "/run/sinew-bench-bare-" + std::to_string(getpid());
  fs::create_directories(dir + "/bundle");
  std::vector<std::string> args =
      detach ? std::vector<std::string>{"/bin/sleep", "60"} : std::vector<std::string>{"/bin/true"};
  std::ofstream(dir + "/bundle/config.json") << sinew::sandbox::BuildBareOciConfig(rootfs, args);
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    std::string id = "bench-bare-" + std::to_string(getpid()) + "-" + std::to_string(i);
    std::vector<std::string> argv = {"runc", "--root", dir + "/runc", "run"};
    if (detach) argv.push_back("--detach");
    argv.insert(argv.end(), {"--bundle", dir + "/bundle", id});
    auto start = Clock::now();
    auto r = sinew::sandbox::RunProcess(argv, std::chrono::seconds(30), detach ? dir + "/log" : "");
    times.push_back(Ms(Clock::now() - start));
    if (detach) {
      (void)sinew::sandbox::RunProcess({"runc", "--root", dir + "/runc", "delete", "--force", id},
                                       std::chrono::seconds(30));
    }
    if (!r.ok() || r->exit_code != 0) {
      std::cerr << "bare runc failed: " << (r.ok() ? r->output : r.status().ToString()) << "\n";
      break;
    }
  }
  fs::remove_all(dir);
  return times;
}

std::vector<double> ProvisionLoop(BenchDaemon& d, int n, bool wait_warm) {
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    if (wait_warm) {
      for (int k = 0; k < 400; ++k) {
        auto h = d.client().Health();
        if (h.ok() && h->warm() >= 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    auto start = Clock::now();
    auto box = d.client().Provision(Shape());
    double ms = Ms(Clock::now() - start);
    if (!box.ok()) {
      std::cerr << "provision failed: " << box.status().ToString() << "\n";
      break;
    }
    if (box->from_warm_pool() != wait_warm)
      std::cerr << "note: from_warm_pool=" << box->from_warm_pool() << "\n";
    times.push_back(ms);
    (void)d.client().Destroy(box->id());
  }
  return times;
}

double LocalEcho() {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const char* argv[] = {"bash", "-c", "echo hi", nullptr};
  auto start = Clock::now();
  pid_t pid;
  posix_spawn(&pid, "/bin/bash", &fa, nullptr, const_cast<char* const*>(argv), environ);
  close(fds[1]);
  char buf[64];
  while (read(fds[0], buf, sizeof(buf)) > 0) {
  }
  waitpid(pid, nullptr, 0);
  double ms = Ms(Clock::now() - start);
  close(fds[0]);
  posix_spawn_file_actions_destroy(&fa);
  return ms;
}

RuntimeFigures MeasureRuntime(const std::string& bin_dir, const std::string& image_root, int port,
                              const std::string& runtime, int n, int runs) {
  RuntimeFigures f;
  BenchDaemon d(bin_dir, image_root, port, 0);
  std::vector<double> cold;
  for (int i = 0; i < n; ++i) {
    auto start = Clock::now();
    auto box = d.client().Provision(Shape(runtime));
    double ms = Ms(Clock::now() - start);
    if (!box.ok()) {
      std::cerr << runtime << " provision failed: " << box.status().ToString() << "\n";
      return f;
    }
    cold.push_back(ms);
    (void)d.client().Destroy(box->id());
  }
  auto box = d.client().Provision(Shape(runtime));
  if (!box.ok()) return f;
  auto tools = sinew::sandbox::SandboxClient::ConnectTo(*box);
  if (!tools.ok()) return f;
  std::string input = std::string(R"({"command":")") + kSyscallHeavy + R"(","timeout":600})";
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    auto r = (*tools)->Execute("bash", input);
    times.push_back(Ms(Clock::now() - start));
    if (!r.ok() || r->output() != "done\n") {
      std::cerr << runtime << " syscall run failed\n";
      return f;
    }
  }
  (void)d.client().Destroy(box->id());
  f.cold = Percentiles(cold);
  f.syscalls = Percentiles(times);
  f.ok = true;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_sandbox: sandbox start and Execute latency against bare runc and fork/exec"};
  int n = 30, m = 200;
  std::string image_root = "/var/lib/sinew/images";
  std::string bin_dir;
  app.add_option("--iterations", n, "provisions per measurement")->capture_default_str();
  app.add_option("--exec-iterations", m, "Execute calls")->capture_default_str();
  app.add_option("--image-root", image_root, "image directory")->capture_default_str();
  app.add_option("--bin-dir", bin_dir, "where sinew-sandboxd is (default: next to this binary)");
  bool no_runsc = false;
  app.add_flag("--no-runsc", no_runsc, "skip the gVisor comparison");
  CLI11_PARSE(app, argc, argv);
  if (bin_dir.empty()) bin_dir = fs::read_symlink("/proc/self/exe").parent_path().string();
  std::string rootfs = image_root + "/default/rootfs";
  if (geteuid() != 0 || !fs::exists(image_root + "/default/READY")) {
    std::cerr
        << "bench_sandbox: needs root and the default image (sandbox-agent/image/build-image.sh)\n";
    return 2;
  }
  int port = 30000 + getpid() % 5000;

  auto bare = Percentiles(BareRunc(rootfs, n, false));
  auto bare_detached = Percentiles(BareRunc(rootfs, n, true));
  Stats cold, warm;
  {
    BenchDaemon d(bin_dir, image_root, port, 0);
    cold = Percentiles(ProvisionLoop(d, n, false));
  }
  std::vector<double> exec_times, local_times;
  {
    BenchDaemon d(bin_dir, image_root, port + 1, 1);
    warm = Percentiles(ProvisionLoop(d, n, true));
    auto box = d.client().Provision(Shape());
    if (!box.ok()) {
      std::cerr << box.status().ToString() << "\n";
      return 1;
    }
    auto tools = sinew::sandbox::SandboxClient::ConnectTo(*box);
    if (!tools.ok()) return 1;
    for (int i = 0; i < 10; ++i) (void)(*tools)->Execute("bash", R"({"command":"echo hi"})");
    for (int i = 0; i < m; ++i) {
      auto start = Clock::now();
      auto r = (*tools)->Execute("bash", R"({"command":"echo hi"})");
      exec_times.push_back(Ms(Clock::now() - start));
      if (!r.ok() || r->output() != "hi\n") {
        std::cerr << "execute failed\n";
        return 1;
      }
    }
    for (int i = 0; i < 10; ++i) LocalEcho();
    for (int i = 0; i < m; ++i) local_times.push_back(LocalEcho());
    (void)d.client().Destroy(box->id());
  }
  auto exec = Percentiles(exec_times);
  auto local = Percentiles(local_times);

  std::printf("bench_sandbox: %d provisions each, %d Execute calls, %u CPUs\n", n, m,
              std::thread::hardware_concurrency());
  std::printf("  %-38s p50 %8.2f ms  p99 %8.2f ms\n", "bare runc run /bin/true", bare.p50,
              bare.p99);
  std::printf("  %-38s p50 %8.2f ms  p99 %8.2f ms\n", "bare runc run --detach sleep (start)",
              bare_detached.p50, bare_detached.p99);
  std::printf("  %-38s p50 %8.2f ms  p99 %8.2f ms\n", "Provision cold (agent ready)", cold.p50,
              cold.p99);
  std::printf("  %-38s p50 %8.2f ms  p99 %8.2f ms\n", "Provision from warm pool", warm.p50,
              warm.p99);
  std::printf("  %-38s p50 %8.3f ms  p99 %8.3f ms\n", "Execute bash `echo hi` round trip", exec.p50,
              exec.p99);
  std::printf("  %-38s p50 %8.3f ms  p99 %8.3f ms\n", "local fork/exec bash -c 'echo hi'",
              local.p50, local.p99);
  std::printf("ratios (p50):\n");
  std::printf("  cold / bare runc       %6.2fx  (target <= 1.5x)\n", cold.p50 / bare.p50);
  std::printf("  cold / bare run -d     %6.2fx\n", cold.p50 / bare_detached.p50);
  std::printf("  warm / cold            %6.3fx  (target < 0.1x)\n", warm.p50 / cold.p50);
  std::printf("  Execute / fork-exec    %6.2fx\n", exec.p50 / local.p50);

  // Runtimes side by side.
  const int runs = 5;
  std::vector<double> bare_sys;
  for (int i = 0; i < runs; ++i) bare_sys.push_back(LocalCommand(kSyscallHeavy));
  auto bare_syscalls = Percentiles(bare_sys);
  auto runc_f = MeasureRuntime(bin_dir, image_root, port + 2, "runc", n, runs);
  RuntimeFigures runsc_f;
  if (!no_runsc) runsc_f = MeasureRuntime(bin_dir, image_root, port + 3, "runsc", n, runs);
  std::printf("runtimes (%s; p50 of %d cold starts, %d runs of the dd command):\n", kSyscallHeavy, n,
              runs);
  std::printf("  %-10s cold start %8.2f ms   syscall-heavy command %9.2f ms\n", "bare", bare.p50,
              bare_syscalls.p50);
  const std::vector<std::pair<const char*, RuntimeFigures*>> measured = {{"runc", &runc_f},
                                                                        {"runsc", &runsc_f}};
  for (const auto& [name, f] : measured) {
    if (!f->ok) {
      std::printf("  %-10s not measured\n", name);
      continue;
    }
    std::printf("  %-10s cold start %8.2f ms   syscall-heavy command %9.2f ms   (%.2fx / %.2fx bare)\n",
                name, f->cold.p50, f->syscalls.p50, f->cold.p50 / bare.p50,
                f->syscalls.p50 / bare_syscalls.p50);
  }
  if (runc_f.ok && runsc_f.ok) {
    std::printf("  runsc / runc: cold start %.2fx, syscall-heavy command %.2fx\n",
                runsc_f.cold.p50 / runc_f.cold.p50, runsc_f.syscalls.p50 / runc_f.syscalls.p50);
  }
  return 0;
}
