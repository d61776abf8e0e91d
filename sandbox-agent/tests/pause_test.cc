// Pause and resume with real runc sandboxes: repeated cycles with writes between them
// keep every file (checked file by file), the sandbox keeps its id, endpoint and secret,
// a running process refuses the pause, and a paused sandbox survives a daemon restart.
// SINEW_PAUSE_CYCLES sets the number of cycles (the `long` build runs 50).
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "sandboxd_process.h"
#include "snapshot_checks.h"

#ifndef SINEW_PAUSE_CYCLES
#define SINEW_PAUSE_CYCLES 5
#endif

namespace sinew::sandbox::testing {
namespace {

using ::testing::HasSubstr;

bool HasCgroup(const SandboxdProcess& d, const std::string& id) {
  auto all = d.Cgroups();
  return std::find(all.begin(), all.end(), id) != all.end();
}

TEST(PauseTest, PauseResumeCyclesKeepEveryFileAndTheSandboxsIdentity) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  WriteHostileTree(*Connect(box));
  for (int cycle = 0; cycle < SINEW_PAUSE_CYCLES; ++cycle) {
    auto tools = Connect(box);
    const std::string c = std::to_string(cycle);
    auto w = Bash(*tools, "head -c 300000 /dev/urandom > /workspace/cycle-" + c + ".bin && echo " + c +
                              " >> /workspace/log && rm -f /workspace/cycle-" + std::to_string(cycle - 2) +
                              ".bin && echo " + c + " > /tmp/last && echo ok");
    ASSERT_EQ(w.output(), "ok\n") << w.output();
    const std::string before = Manifest(*tools);
    tools.reset();

    auto paused = d.client().Pause(box.id(), "alice");
    ASSERT_TRUE(paused.ok()) << "cycle " << c << ": " << paused.status().ToString();
    EXPECT_EQ(paused->state(), v1::SANDBOX_STATE_PAUSED);
    EXPECT_FALSE(HasCgroup(d, box.id())) << "a paused sandbox holds no memory or CPU";
    EXPECT_EQ(d.client().Get(box.id())->state(), v1::SANDBOX_STATE_PAUSED);

    auto resumed = d.client().Resume(box.id(), "alice");
    ASSERT_TRUE(resumed.ok()) << "cycle " << c << ": " << resumed.status().ToString();
    EXPECT_EQ(resumed->state(), v1::SANDBOX_STATE_READY);
    EXPECT_EQ(resumed->id(), box.id());
    EXPECT_EQ(resumed->endpoint(), box.endpoint());
    EXPECT_EQ(resumed->agent_secret(), box.agent_secret());
    EXPECT_FALSE(resumed->memory_restored()) << "under runc processes start again";
    EXPECT_EQ(resumed->resumes(), static_cast<uint32_t>(cycle + 1));
    box = *resumed;
    EXPECT_EQ(Manifest(*Connect(box)), before) << "cycle " << c;
  }
  auto log = Bash(*Connect(box), "wc -l < /workspace/log");
  EXPECT_EQ(log.output(), std::to_string(SINEW_PAUSE_CYCLES) + "\n");
  // Pause snapshots are removed on resume: nothing is left but what the owner asked for.
  EXPECT_EQ(d.client().ListSnapshots("alice")->snapshots_size(), 0);
  EXPECT_EQ(CountFiles(d.state_dir() + "/snapshots/chunks"), 0u);
}

TEST(PauseTest, ARunningProcessRefusesThePauseAndNothingChanges) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  auto bg = Bash(*tools, "setsid sleep 600 >/dev/null 2>&1 </dev/null & echo started");
  ASSERT_EQ(bg.output(), "started\n");
  auto refused = d.client().Pause(box.id(), "alice");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("background job"));
  EXPECT_EQ(d.client().Get(box.id())->state(), v1::SANDBOX_STATE_READY);
  EXPECT_EQ(Bash(*tools, "pgrep -c sleep").output(), "1\n") << "the job keeps running";
  EXPECT_EQ(d.client().ListSnapshots("alice")->snapshots_size(), 0);
  Bash(*tools, "pkill sleep; while pgrep sleep >/dev/null; do sleep 0.05; done");
  auto paused = d.client().Pause(box.id(), "alice");
  EXPECT_TRUE(paused.ok()) << paused.status().ToString();
}

// An idle timer's pause (if_idle) under runc: refused while a background job runs, which
// keeps running; taken once it has ended.
TEST(PauseTest, AnIdlePauseIsRefusedWhileABackgroundJobRuns) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  ASSERT_EQ(Bash(*tools, "setsid sleep 600 >/dev/null 2>&1 </dev/null & echo started").output(), "started\n");
  auto refused = d.client().Pause(box.id(), "alice", /*if_idle=*/true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not idle"));
  EXPECT_EQ(d.client().Get(box.id())->state(), v1::SANDBOX_STATE_READY);
  EXPECT_EQ(Bash(*tools, "pgrep -c sleep").output(), "1\n") << "the job keeps running";
  Bash(*tools, "pkill sleep; while pgrep sleep >/dev/null; do sleep 0.05; done");
  tools.reset();
  auto paused = d.client().Pause(box.id(), "alice", /*if_idle=*/true);
  ASSERT_TRUE(paused.ok()) << paused.status().ToString();
  EXPECT_EQ(paused->state(), v1::SANDBOX_STATE_PAUSED);
}

TEST(PauseTest, APausedSandboxSurvivesARestartOfTheDaemon) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  Bash(*tools, "echo kept > /workspace/note; head -c 2000000 /dev/urandom > /workspace/blob");
  const std::string before = Manifest(*tools);
  tools.reset();
  ASSERT_TRUE(d.client().Pause(box.id(), "alice").ok());
  d.Kill(SIGKILL);  // a crash: nothing is shut down cleanly
  d.Restart({"--warm-pool-size", "0"});
  auto info = d.client().Get(box.id());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state(), v1::SANDBOX_STATE_PAUSED);
  auto resumed = d.client().Resume(box.id(), "alice");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->agent_secret(), box.agent_secret());
  EXPECT_EQ(Manifest(*Connect(*resumed)), before);
}

TEST(PauseTest, DestroyingAPausedSandboxRemovesItsSnapshot) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  Bash(*Connect(box), "head -c 2000000 /dev/urandom > /workspace/blob");
  auto paused = d.client().Pause(box.id(), "alice");
  ASSERT_TRUE(paused.ok());
  auto snaps = d.client().ListSnapshots("alice");
  ASSERT_EQ(snaps->snapshots_size(), 1);
  EXPECT_EQ(d.client().DeleteSnapshot(snaps->snapshots(0).id(), "alice").status().code(),
            StatusCode::kFailedPrecondition)
      << "the snapshot of a paused sandbox goes with the sandbox";
  auto ended = d.client().Destroy(box.id());
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->outcome(), v1::SANDBOX_OUTCOME_DESTROYED);
  EXPECT_EQ(d.client().ListSnapshots("alice")->snapshots_size(), 0);
  EXPECT_EQ(CountFiles(d.state_dir() + "/snapshots/chunks"), 0u);
  EXPECT_EQ(d.client().Resume(box.id(), "alice").status().code(), StatusCode::kNotFound);
}

TEST(PauseTest, ResumeOfAnotherOwnersOrAnUnknownSandboxIsNotFound) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  ASSERT_TRUE(d.client().Pause(box.id(), "alice").ok());
  EXPECT_EQ(d.client().Resume(box.id(), "mallory").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().Resume("sb-nosuch", "alice").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().Get(box.id())->state(), v1::SANDBOX_STATE_PAUSED) << "a refusal changes nothing";
}

}  // namespace
}  // namespace sinew::sandbox::testing
