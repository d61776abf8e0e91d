// Snapshots, pause and fork of runsc sandboxes through gVisor's checkpoint and restore,
// with real runsc sandboxes: a background process's memory (a random number and a
// counter) comes back with it and its count goes on; an exactly-once call keeps its
// result across a pause; a snapshot restored twice gives two independent sandboxes,
// each with its own identity; a restore into less memory than the snapshot's is refused;
// an idle timer's pause waits for background jobs to end.
// SINEW_PAUSE_CYCLES sets the number of pause/resume cycles (the `long` build runs 50).
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sandboxd_process.h"
#include "snapshot_checks.h"

#ifndef SINEW_PAUSE_CYCLES
#define SINEW_PAUSE_CYCLES 2
#endif

namespace sinew::sandbox::testing {
namespace {

using ::testing::HasSubstr;

struct Holder {
  std::string pid;
  std::string secret;
  long count = -1;
};

Holder ParseHolder(const std::string& line) {
  Holder h;
  std::istringstream in(line);
  in >> h.pid >> h.secret >> h.count;
  return h;
}

class RunscCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.Start({"--warm-pool-size", "0"});
    if (!RunscUsable(d_)) GTEST_SKIP() << "runsc is not usable here";
  }
  SandboxdProcess d_;
};

TEST_F(RunscCheckpointTest, PauseAndResumeKeepABackgroundProcessItsMemoryAndItsCount) {
  auto box = ProvisionRunsc(d_, "alice");
  auto tools = Connect(box);
  StartMemoryHolder(*tools);
  Bash(*tools, "echo kept > /workspace/file");
  const std::string input = R"({"command":"echo once-$RANDOM-$RANDOM"})";
  auto first = tools->Execute("bash", input, "call-1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Holder last = ParseHolder(HolderState(*tools));
  ASSERT_GT(last.count, 0);
  tools.reset();
  for (int cycle = 0; cycle < SINEW_PAUSE_CYCLES; ++cycle) {
    auto paused = d_.client().Pause(box.id(), "alice");
    ASSERT_TRUE(paused.ok()) << "cycle " << cycle << ": " << paused.status().ToString();
    EXPECT_EQ(paused->state(), v1::SANDBOX_STATE_PAUSED);
    auto resumed = d_.client().Resume(box.id(), "alice");
    ASSERT_TRUE(resumed.ok()) << "cycle " << cycle << ": " << resumed.status().ToString();
    EXPECT_TRUE(resumed->memory_restored());
    EXPECT_EQ(resumed->endpoint(), box.endpoint());
    EXPECT_EQ(resumed->agent_secret(), box.agent_secret());
    auto t = Connect(*resumed);
    const Holder now = ParseHolder(HolderState(*t));
    EXPECT_EQ(now.pid, last.pid) << "cycle " << cycle << ": the same process";
    EXPECT_EQ(now.secret, last.secret) << "cycle " << cycle << ": its memory came back";
    EXPECT_GT(now.count, last.count)
        << "cycle " << cycle << ": its count went on, it did not start again";
    last = now;
    EXPECT_EQ(Bash(*t, "cat /workspace/file").output(), "kept\n");
    auto again = t->Execute("bash", input, "call-1");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again->replayed()) << "the call registry came back with the agent's memory";
    EXPECT_EQ(again->output(), first->output()) << "the call ran once";
  }
  // The pause snapshots went with the resumes.
  EXPECT_EQ(d_.client().ListSnapshots("alice")->snapshots_size(), 0);
}

TEST_F(RunscCheckpointTest, APausedSandboxSurvivesARestartOfTheDaemonWithItsMemory) {
  auto box = ProvisionRunsc(d_, "alice");
  auto tools = Connect(box);
  StartMemoryHolder(*tools);
  const Holder before = ParseHolder(HolderState(*tools));
  tools.reset();
  ASSERT_TRUE(d_.client().Pause(box.id(), "alice").ok());
  d_.Kill(SIGKILL);  // a crash: nothing is shut down cleanly
  d_.Restart({"--warm-pool-size", "0"});
  EXPECT_EQ(d_.client().Get(box.id())->state(), v1::SANDBOX_STATE_PAUSED);
  auto resumed = d_.client().Resume(box.id(), "alice");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_TRUE(resumed->memory_restored());
  const Holder after = ParseHolder(HolderState(*Connect(*resumed)));
  EXPECT_EQ(after.secret, before.secret);
  EXPECT_GT(after.count, before.count);
}

TEST_F(RunscCheckpointTest, ASnapshotRestoredTwiceGivesTwoIndependentSandboxesWithItsMemory) {
  auto box = ProvisionRunsc(d_, "alice");
  auto tools = Connect(box);
  StartMemoryHolder(*tools);
  Bash(*tools, "echo base > /workspace/who");
  const Holder before = ParseHolder(HolderState(*tools));
  tools.reset();
  v1::ForkRequest fork;
  fork.set_owner("alice");
  fork.set_sandbox_id(box.id());
  fork.set_n(2);
  auto forked = d_.client().Fork(fork);
  ASSERT_TRUE(forked.ok()) << forked.status().ToString();
  EXPECT_TRUE(forked->snapshot().memory());
  ASSERT_EQ(forked->sandboxes_size(), 2);
  const auto& a = forked->sandboxes(0);
  const auto& b = forked->sandboxes(1);
  EXPECT_NE(a.id(), b.id());
  EXPECT_NE(a.agent_secret(), b.agent_secret());
  EXPECT_NE(a.agent_secret(), box.agent_secret());
  for (const auto& f : forked->sandboxes()) {
    EXPECT_TRUE(f.memory_restored()) << f.id();
    EXPECT_EQ(f.from_snapshot(), forked->snapshot().id());
    auto t = Connect(f);
    const Holder h = ParseHolder(HolderState(*t));
    EXPECT_EQ(h.secret, before.secret) << f.id() << ": the holder's memory, copied";
    EXPECT_GE(h.count, before.count) << f.id();
    Bash(*t, "echo " + f.id() + " > /workspace/who");
  }
  // Each fork is its own: its file, its process.
  EXPECT_EQ(Bash(*Connect(a), "cat /workspace/who").output(), a.id() + "\n");
  EXPECT_EQ(Bash(*Connect(b), "cat /workspace/who").output(), b.id() + "\n");
  Bash(*Connect(a), "kill -9 $(cat /tmp/holder.pid)");
  EXPECT_EQ(ParseHolder(HolderState(*Connect(b))).secret, before.secret) << "b's holder runs on";
  // The source runs on, snapshotted in place, with its own process and files.
  auto source = Connect(box);
  EXPECT_EQ(Bash(*source, "cat /workspace/who").output(), "base\n");
  EXPECT_EQ(ParseHolder(HolderState(*source)).secret, before.secret);
  // A fork's agent answers to its own secret only, not its source's.
  v1::SandboxInfo stolen = a;
  stolen.set_agent_secret(box.agent_secret());
  auto wrong = SandboxClient::ConnectTo(stolen);
  if (wrong.ok()) {
    EXPECT_FALSE((*wrong)->Execute("bash", R"({"command":"true"})").ok());
  }
}

TEST_F(RunscCheckpointTest, ARestoreIntoLessMemoryOrUnderRuncIsRefusedAndStartsNothing) {
  auto box = ProvisionRunsc(d_, "alice");
  auto snap = d_.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_TRUE(snap->memory());
  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(snap->id());
  req.mutable_resources()->set_memory_limit_bytes(box.resources().memory_limit_bytes() / 2);
  auto refused = d_.client().ProvisionWith(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("memory_limit_bytes"));
  req.mutable_resources()->set_memory_limit_bytes(0);
  req.mutable_resources()->set_runtime("runc");
  refused = d_.client().ProvisionWith(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("runsc"));
  EXPECT_EQ(d_.client().List()->size(), 1u);
  EXPECT_EQ(d_.SandboxDirs().size(), 1u);
  // The source still serves after its snapshot.
  EXPECT_EQ(Bash(*Connect(box), "echo alive").output(), "alive\n");
}

// An idle timer's pause (if_idle) of a runsc sandbox: taken when only the agent (and its
// socket binder) run, refused while a background job runs, which keeps running (an
// ordinary pause would checkpoint it), and taken again once the job has ended.
TEST_F(RunscCheckpointTest, AnIdlePauseWaitsForBackgroundJobsToEnd) {
  auto box = ProvisionRunsc(d_, "alice");
  auto idle = d_.client().Pause(box.id(), "alice", /*if_idle=*/true);
  ASSERT_TRUE(idle.ok()) << "a sandbox running nothing but its agent is idle: " << idle.status().ToString();
  EXPECT_EQ(idle->state(), v1::SANDBOX_STATE_PAUSED);
  auto resumed = d_.client().Resume(box.id(), "alice");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  auto tools = Connect(*resumed);
  StartMemoryHolder(*tools);
  const Holder before = ParseHolder(HolderState(*tools));
  auto refused = d_.client().Pause(box.id(), "alice", /*if_idle=*/true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not idle"));
  EXPECT_NE(d_.client().Get(box.id())->state(), v1::SANDBOX_STATE_PAUSED);
  const Holder after = ParseHolder(HolderState(*tools));
  EXPECT_EQ(after.pid, before.pid);
  EXPECT_GT(after.count, before.count) << "the job ran on";
  EXPECT_EQ(d_.client().ListSnapshots("alice")->snapshots_size(), 0) << "the refusal kept nothing";
  Bash(*tools, "kill -9 $(cat /tmp/holder.pid); while kill -0 $(cat /tmp/holder.pid) 2>/dev/null; do sleep 0.05; done");
  tools.reset();
  auto paused = d_.client().Pause(box.id(), "alice", /*if_idle=*/true);
  EXPECT_TRUE(paused.ok()) << paused.status().ToString();
}

// An attack on the idle check: `runsc ps` prints each process's name, which a process
// sets itself (prctl PR_SET_NAME). A job that names itself with a line break and a forged
// row (uid 0, pid 1: the agent's) still counts: its own row is printed too.
TEST_F(RunscCheckpointTest, AJobThatForgesItsProcessRowStillKeepsTheSandboxAwake) {
  auto box = ProvisionRunsc(d_, "alice");
  auto tools = Connect(box);
  auto started = Bash(*tools,
                      "setsid python3 -c \"import ctypes, time\n"
                      "ctypes.CDLL(None).prctl(15, b'x\\n0 1 0 0 ? 00', 0, 0, 0)\n"
                      "time.sleep(600)\" >/dev/null 2>&1 </dev/null & echo $! > /tmp/forger.pid; sleep 0.5; echo started");
  ASSERT_EQ(started.output(), "started\n");
  // The name took: two lines (the forged row after the break).
  ASSERT_EQ(Bash(*tools, "wc -l < /proc/$(cat /tmp/forger.pid)/comm").output(), "2\n");
  auto refused = d_.client().Pause(box.id(), "alice", /*if_idle=*/true);
  ASSERT_FALSE(refused.ok()) << "the forged row hid the job";
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not idle"));
  EXPECT_NE(d_.client().Get(box.id())->state(), v1::SANDBOX_STATE_PAUSED);
}

}  // namespace
}  // namespace sinew::sandbox::testing
