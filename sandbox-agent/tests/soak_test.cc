// Long soak (ctest label `long`): many provision/execute/destroy cycles from several
// threads with warm pools of two shapes; afterwards nothing is left and the daemon's
// open descriptors did not grow. And a minute of fork bomb under runsc, whose host tasks
// keep growing for as long as it runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "sandboxd_process.h"

namespace sinew::sandbox::testing {
namespace {

constexpr int kThreads = 4;
constexpr int kCyclesPerThread = 60;

size_t OpenFds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

TEST(SoakTest, ManyCyclesLeaveNothingBehind) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "2"});
  // Warm up both shapes once, then measure descriptors.
  for (int shape = 0; shape < 2; ++shape) {
    v1::Resources r = SmallResources();
    if (shape == 1) r.set_memory_limit_bytes(192ull << 20);
    auto box = d.client().Provision(r);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    ASSERT_TRUE(d.client().Destroy(box->id()).ok());
  }
  size_t fds_before = OpenFds(d.pid());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int cycle = 0; cycle < kCyclesPerThread; ++cycle) {
        v1::Resources r = SmallResources();
        if ((cycle + t) % 2 == 1) r.set_memory_limit_bytes(192ull << 20);
        auto box = d.client().Provision(r);
        if (!box.ok()) {
          ++failures;
          continue;
        }
        auto tools = SandboxClient::ConnectTo(*box);
        if (tools.ok()) {
          auto res = (*tools)->Execute("bash", R"json({"command":"echo $((6*7))"})json");
          if (!res.ok() || res->output() != "42\n") ++failures;
        } else {
          ++failures;
        }
        if (!d.client().Destroy(box->id()).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto listed = d.client().List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_LE(OpenFds(d.pid()), fds_before + 8);  // grpc may keep a few more connections
  auto all = d.client().List(true);
  ASSERT_TRUE(all.ok());
  EXPECT_GE(all->size(), static_cast<size_t>(kThreads * kCyclesPerThread));
  d.Kill(SIGTERM);  // destroys the warm ones
  EXPECT_TRUE(d.RuncContainers().empty());
  EXPECT_TRUE(d.Cgroups().empty());
  EXPECT_TRUE(d.SandboxDirs().empty());
  EXPECT_TRUE(d.Mounts().empty());
}

TEST(SoakTest, CrashLoopDuringProvisioningLeaksNothing) {
  SandboxdProcess d;
  for (int round = 0; round < 10; ++round) {
    d.Start({"--warm-pool-size", "3"});
    // Provision from several threads and kill the daemon while they (and the pool) are
    // starting containers, at a different moment each round.
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] { (void)d.client().Provision(SmallResources()); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 37 * round));
    d.Kill(SIGKILL);
    for (auto& th : threads) th.join();
  }
  d.Start({"--warm-pool-size", "0"});
  EXPECT_TRUE(d.RuncContainers().empty());
  EXPECT_TRUE(d.Cgroups().empty());
  EXPECT_TRUE(d.SandboxDirs().empty());
  EXPECT_TRUE(d.Mounts().empty());
  auto box = d.client().Provision(SmallResources());
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  auto tools = SandboxClient::ConnectTo(*box);
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(Bash(**tools, "echo ok").output(), "ok\n");
}


// Under gVisor's ptrace platform a fork bomb's host tasks grow for as long as it runs
// (stub threads for every sentry thread that runs a guest task). A minute of it at the
// process limit: forks refused, the host never refuses the sentry, the sandbox answers.
TEST(SoakTest, AMinuteOfForkBombUnderRunscLeavesTheSandboxAnswering) {
  if (system("runsc --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "runsc (gVisor) is not installed: apt-get install runsc";
  }
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  v1::Resources r = SmallResources();
  r.set_runtime("runsc");
  auto box = d.client().Provision(r);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  auto tools = SandboxClient::ConnectTo(*box);
  ASSERT_TRUE(tools.ok());
  auto bomb = Bash(**tools, "bomb() { bomb | bomb & }; bomb; sleep 120", 60);
  EXPECT_NE(bomb.output().find("Resource temporarily unavailable"), std::string::npos);
  const bool v2 = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
  const std::string cg = "/sys/fs/cgroup/" + std::string(v2 ? "" : "pids/") + d.cgroup_parent() + "/" +
                         box->id() + "/";
  std::ifstream events(cg + "pids.events"), peak(cg + "pids.peak");
  std::string events_text((std::istreambuf_iterator<char>(events)), {});
  std::string peak_text((std::istreambuf_iterator<char>(peak)), {});
  std::cout << "host tasks at the peak: " << peak_text << "\n";
  EXPECT_EQ(events_text, "max 0\n");
  std::string answer;
  for (int i = 0; i < 120 && answer != "still here\n"; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto alive = (*tools)->Execute("bash", R"({"command":"echo still here","timeout":10})");
    ASSERT_TRUE(alive.ok()) << alive.status().ToString();
    answer = alive->output();
  }
  EXPECT_EQ(answer, "still here\n");
  ASSERT_TRUE(d.client().Destroy(box->id()).ok());
  EXPECT_TRUE(d.Cgroups().empty());
}

}  // namespace
}  // namespace sinew::sandbox::testing
