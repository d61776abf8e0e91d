// Snapshots, fork, pause and resume with real runc sandboxes: what a sandbox wrote (hostile
// entries included) comes back file by file, refusals change nothing, and snapshots and
// paused sandboxes survive a restart of the daemon.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "sandboxd_process.h"
#include "snapshot_checks.h"

namespace sinew::sandbox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(SnapshotTest, ProvisionFromASnapshotRestoresEveryFileAndSaysProcessesStartedAgain) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  WriteHostileTree(*tools);
  const std::string before = Manifest(*tools);
  EXPECT_THAT(before, HasSubstr("workspace/secret -> /etc/shadow\n"));
  EXPECT_THAT(before, HasSubstr("p 644 1000 1000 1 0 "));  // the fifo
  EXPECT_THAT(before, HasSubstr("f 751 1000 1000 2 12 981173106.0000000000 workspace/src/main.py"));
  EXPECT_THAT(before, HasSubstr("tmp/t.txt"));
  EXPECT_THAT(before, HasSubstr("dev/shm/s"));
  EXPECT_THAT(before, HasSubstr("end\nstill-sparse\n"));

  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->owner(), "alice");
  EXPECT_EQ(snap->source_sandbox(), box.id());
  EXPECT_FALSE(snap->host().empty());
  EXPECT_FALSE(snap->memory());
  EXPECT_GT(snap->data_bytes(), 0u);
  EXPECT_LT(snap->data_bytes(), 16u << 20) << "the 1 GiB sparse file must not be stored as data";

  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(snap->id());
  auto copy = d.client().ProvisionWith(req);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_NE(copy->id(), box.id());
  EXPECT_EQ(copy->from_snapshot(), snap->id());
  EXPECT_FALSE(copy->memory_restored());
  EXPECT_EQ(copy->resources().memory_limit_bytes(), box.resources().memory_limit_bytes());
  auto copy_tools = Connect(*copy);
  EXPECT_EQ(Manifest(*copy_tools), before);
  // The symlink points at the sandbox's own /etc/shadow, never at the host's content.
  auto link = Bash(*copy_tools, "readlink /workspace/secret; cat /workspace/secret 2>&1 | head -c 200");
  EXPECT_THAT(link.output(), HasSubstr("/etc/shadow\n"));
  EXPECT_THAT(link.output(), HasSubstr("Permission denied"));
  // The copy is its own: writing there changes nothing in the original.
  Bash(*copy_tools, "echo changed > /workspace/src/main.py");
  EXPECT_EQ(Bash(*tools, "cat /workspace/src/main.py").output(), "print('hi')\n");
}

TEST(SnapshotTest, ARestoreIntoAWarmSandboxHasTheFilesToo) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "1"});
  v1::ProvisionRequest req;
  req.set_owner("alice");  // the daemon's default shape, which has a warm pool
  auto box = d.client().ProvisionWith(req);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  auto tools = Connect(*box);
  WriteHostileTree(*tools);
  const std::string before = Manifest(*tools);
  auto snap = d.client().Snapshot(box->id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  // Wait until the pool has a sandbox again (it refills in the background).
  for (int i = 0; i < 400 && d.client().Health()->warm() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(d.client().Health()->warm(), 1u);
  req.set_from_snapshot(snap->id());
  auto copy = d.client().ProvisionWith(req);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_TRUE(copy->from_warm_pool());
  EXPECT_EQ(copy->from_snapshot(), snap->id());
  EXPECT_EQ(Manifest(*Connect(*copy)), before);
}

TEST(SnapshotTest, UnknownIdsAndAnotherOwnersSandboxesAndSnapshotsAreNotFound) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();

  EXPECT_EQ(d.client().Snapshot(box.id(), "mallory").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().Snapshot("sb-nosuch", "alice").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().DeleteSnapshot(snap->id(), "mallory").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().Pause(box.id(), "mallory").status().code(), StatusCode::kNotFound);
  v1::ProvisionRequest req;
  req.set_owner("mallory");
  req.set_from_snapshot(snap->id());
  EXPECT_EQ(d.client().ProvisionWith(req).status().code(), StatusCode::kNotFound);
  req.set_owner("alice");
  req.set_from_snapshot("snap-nosuch");
  EXPECT_EQ(d.client().ProvisionWith(req).status().code(), StatusCode::kNotFound);
  v1::ForkRequest fork;
  fork.set_owner("mallory");
  fork.set_snapshot_id(snap->id());
  fork.set_n(2);
  EXPECT_EQ(d.client().Fork(fork).status().code(), StatusCode::kNotFound);

  // Nothing changed: alice's snapshot is there, mallory has none, no sandbox was added.
  auto mine = d.client().ListSnapshots("alice");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->snapshots_size(), 1);
  EXPECT_EQ(mine->snapshots(0).id(), snap->id());
  EXPECT_EQ(d.client().ListSnapshots("mallory")->snapshots_size(), 0);
  EXPECT_EQ(d.client().List()->size(), 1u);
}

TEST(SnapshotTest, RestoreIntoLessMemoryOrWorkspaceIsRefusedAndStartsNothing) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(snap->id());
  req.mutable_resources()->set_memory_limit_bytes(box.resources().memory_limit_bytes() / 2);
  auto refused = d.client().ProvisionWith(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("memory_limit_bytes"));
  req.mutable_resources()->set_memory_limit_bytes(0);
  req.mutable_resources()->set_workspace_bytes(box.resources().workspace_bytes() / 2);
  refused = d.client().ProvisionWith(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("workspace_bytes"));
  EXPECT_EQ(d.client().List()->size(), 1u);
  EXPECT_EQ(d.SandboxDirs().size(), 1u);
}

TEST(SnapshotTest, ForkGivesIndependentCopiesAndStoresTheBytesOnce) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  Bash(*tools, "head -c 5000000 /dev/urandom > /workspace/data.bin && echo base > /workspace/who");
  const std::string before = Manifest(*tools);
  v1::ForkRequest fork;
  fork.set_owner("alice");
  fork.set_sandbox_id(box.id());
  fork.set_n(3);
  auto forked = d.client().Fork(fork);
  ASSERT_TRUE(forked.ok()) << forked.status().ToString();
  ASSERT_EQ(forked->sandboxes_size(), 3);
  EXPECT_EQ(forked->snapshot().added_bytes(), forked->snapshot().data_bytes());
  for (int i = 0; i < 3; ++i) {
    const auto& f = forked->sandboxes(i);
    EXPECT_EQ(f.from_snapshot(), forked->snapshot().id());
    EXPECT_FALSE(f.awaiting_claim());
    auto t = Connect(f);
    EXPECT_EQ(Manifest(*t), before) << f.id();
    Bash(*t, "echo fork" + std::to_string(i) + " > /workspace/who");
  }
  for (int i = 0; i < 3; ++i) {
    auto t = Connect(forked->sandboxes(i));
    EXPECT_EQ(Bash(*t, "cat /workspace/who").output(), "fork" + std::to_string(i) + "\n");
  }
  EXPECT_EQ(Bash(*tools, "cat /workspace/who").output(), "base\n");
  // A second fork of the unchanged source adds no data to the store.
  auto again = d.client().Fork(fork);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->snapshot().added_bytes(), 0u);
  auto listed = d.client().ListSnapshots("alice");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->owner_bytes(), forked->snapshot().data_bytes()) << "each chunk counted once";
}

TEST(SnapshotTest, ForkRefusesBadCountsWithoutStartingAnything) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  v1::ForkRequest fork;
  fork.set_owner("alice");
  fork.set_sandbox_id(box.id());
  for (uint32_t n : {0u, 17u}) {
    fork.set_n(n);
    EXPECT_EQ(d.client().Fork(fork).status().code(), StatusCode::kInvalidArgument) << n;
  }
  fork.set_n(1);
  fork.set_snapshot_id("snap-x");
  EXPECT_EQ(d.client().Fork(fork).status().code(), StatusCode::kInvalidArgument) << "both sources named";
  EXPECT_EQ(d.client().List()->size(), 1u);
  EXPECT_EQ(d.client().ListSnapshots("alice")->snapshots_size(), 0);
}

TEST(SnapshotTest, SnapshotsSurviveARestartAndDeleteCollectsTheirChunks) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  Bash(*tools, "head -c 3000000 /dev/urandom > /workspace/data.bin");
  const std::string before = Manifest(*tools);
  auto first = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->added_bytes(), 0u) << "an unchanged workspace adds no bytes";

  d.Kill(SIGKILL);  // a crash: nothing is shut down cleanly
  d.Restart({"--warm-pool-size", "0"});
  auto listed = d.client().ListSnapshots("alice");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->snapshots_size(), 2);
  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(first->id());
  auto copy = d.client().ProvisionWith(req);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(Manifest(*Connect(*copy)), before);

  const std::string chunks = d.state_dir() + "/snapshots/chunks";
  EXPECT_GT(CountFiles(chunks), 0u);
  ASSERT_TRUE(d.client().DeleteSnapshot(first->id(), "alice").ok());
  EXPECT_GT(CountFiles(chunks), 0u) << "the second snapshot still uses them";
  ASSERT_TRUE(d.client().DeleteSnapshot(second->id(), "alice").ok());
  EXPECT_EQ(CountFiles(chunks), 0u);
  EXPECT_EQ(d.client().DeleteSnapshot(second->id(), "alice").status().code(), StatusCode::kNotFound);
}

TEST(SnapshotTest, OwnerCapRefusesASnapshotWithAMessageAndKeepsNothing) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0", "--snapshot-bytes-per-owner", "2000000"});
  auto box = ProvisionOwned(d, "alice");
  Bash(*Connect(box), "head -c 3000000 /dev/urandom > /workspace/data.bin");
  auto refused = d.client().Snapshot(box.id(), "alice");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--snapshot-bytes-per-owner"));
  EXPECT_EQ(d.client().ListSnapshots("alice")->snapshots_size(), 0);
  EXPECT_EQ(CountFiles(d.state_dir() + "/snapshots/chunks"), 0u);
}

}  // namespace
}  // namespace sinew::sandbox::testing
