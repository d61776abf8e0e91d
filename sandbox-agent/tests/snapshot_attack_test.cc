// Attacks on the snapshot path from inside real runc sandboxes: the sandbox owns its
// workspace, /tmp and /dev/shm, and a snapshot reads them from the host side. Symlinks to
// host paths (the snapshot store's own among them), a directory flipped with a symlink
// while snapshots run, fifos with a writer waiting, files rewritten while read, huge
// sparse files, and a chunk swapped for a fifo in the store must never make the daemon
// read, write or block on anything outside the sandbox.
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "sandboxd/snapshot_tree.h"
#include "sandboxd_process.h"
#include "snapshot_checks.h"

namespace sinew::sandbox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A host directory holding a file with a random secret: a snapshot that followed a
// sandbox's symlink to it would store the secret.
class HostSecret {
 public:
  HostSecret() {
    std::string tmpl = "/tmp/sinew-host-secret-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    std::random_device rd;
    secret_ = "host-secret-" + std::to_string(rd()) + "-" + std::to_string(rd());
    std::ofstream(dir_ + "/secret") << secret_;
    chmod(dir_.c_str(), 0755);
  }
  ~HostSecret() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  const std::string& secret() const { return secret_; }

 private:
  std::string dir_;
  std::string secret_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string Hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Every regular file below `dir`, read whole.
std::vector<std::pair<std::string, std::string>> FilesBelow(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) out.emplace_back(it->path().string(), ReadFile(it->path().string()));
  }
  return out;
}

std::string Chunks(const SandboxdProcess& d) { return d.state_dir() + "/snapshots/chunks"; }

v1::SandboxInfo ProvisionFrom(SandboxdProcess& d, const std::string& snapshot_id) {
  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(snapshot_id);
  auto box = d.client().ProvisionWith(req);
  EXPECT_TRUE(box.ok()) << box.status().ToString();
  return box.ok() ? *box : v1::SandboxInfo();
}

TEST(SnapshotAttackTest, SymlinksToHostPathsAndToTheStoreAreStoredAsLinksAndRestoredInside) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  HostSecret host;
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  const std::string store = d.state_dir() + "/snapshots";
  auto r = Bash(*tools, "set -e; cd /workspace; ln -s /etc/shadow shadow; ln -s ../../.. up; ln -s " + host.dir() +
                            " hostdir; ln -s " + host.dir() + "/secret hostfile; ln -s " + store +
                            " store; ln -s " + store + "/chunks /tmp/chunks; ln -s " + store +
                            "/records /dev/shm/records; echo planted");
  ASSERT_EQ(r.output(), "planted\n");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->data_bytes(), 0u) << "nothing may be read through a symlink";
  EXPECT_EQ(CountFiles(Chunks(d)), 0u);

  auto copy = ProvisionFrom(d, snap->id());
  auto out = Bash(*Connect(copy),
                  "cd /workspace; for l in shadow up hostdir hostfile store /tmp/chunks /dev/shm/records; do "
                  "[ -L $l ] && echo \"$l -> $(readlink $l)\"; done");
  EXPECT_EQ(out.output(), "shadow -> /etc/shadow\nup -> ../../..\nhostdir -> " + host.dir() + "\nhostfile -> " +
                              host.dir() + "/secret\nstore -> " + store + "\n/tmp/chunks -> " + store +
                              "/chunks\n/dev/shm/records -> " + store + "/records\n");
  // Inside the copy, the links resolve in its own file system: the host's are not there.
  EXPECT_EQ(Bash(*Connect(copy), "cat /workspace/hostfile 2>&1; ls /workspace/store/ 2>&1 | head -1").output().find(
                host.secret()),
            std::string::npos);
  EXPECT_EQ(ReadFile(host.dir() + "/secret"), host.secret());
}

TEST(SnapshotAttackTest, ADirectoryFlippedWithASymlinkWhileSnapshotsRunIsNeverFollowed) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  HostSecret host;
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  // d flips between a directory with a file and a symlink to the host's secret directory
  // (which only the host side could resolve), as fast as the sandbox can.
  auto r = Bash(*tools, "cat > /tmp/flip.sh <<'EOF'\n"
                        "cd /workspace\n"
                        "while :; do\n"
                        "  rm -rf d; mkdir d; echo inside > d/f\n"
                        "  rm -rf d; ln -s " +
                            host.dir() +
                            " d\n"
                            "done\n"
                            "EOF\n"
                            "setsid sh /tmp/flip.sh >/dev/null 2>&1 </dev/null & echo $! > /tmp/flip.pid; "
                            "until [ -e /workspace/d ] || [ -L /workspace/d ]; do sleep 0.01; done; echo flipping");
  ASSERT_EQ(r.output(), "flipping\n");
  std::string last;
  for (int i = 0; i < 6; ++i) {
    auto snap = d.client().Snapshot(box.id(), "alice");
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    last = snap->id();
  }
  for (const auto& [path, content] : FilesBelow(d.state_dir() + "/snapshots")) {
    EXPECT_EQ(content.find(host.secret()), std::string::npos) << path << " holds the host's secret";
  }
  auto copy = ProvisionFrom(d, last);
  auto out = Bash(*Connect(copy), "cd /workspace; if [ -L d ]; then echo \"link $(readlink d)\"; "
                                  "elif [ -d d ]; then echo dir; ls -A d; else echo absent; fi");
  EXPECT_THAT(out.output(), ::testing::AnyOf("link " + host.dir() + "\n", "dir\nf\n", "dir\n", "absent\n"));
  EXPECT_EQ(ReadFile(host.dir() + "/secret"), host.secret());
}

TEST(SnapshotAttackTest, FifosInEveryWritableTreeAreKeptWithoutOpeningThem) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  // A writer blocks in open() until someone opens the fifo for reading: if the snapshot
  // opened it, the writer would finish.
  auto r = Bash(*tools, "set -e; mkfifo /workspace/p /tmp/p /dev/shm/p /workspace/waiting; "
                        "setsid sh -c 'echo hi > /workspace/waiting' >/dev/null 2>&1 </dev/null & "
                        "echo $! > /tmp/writer.pid; echo ok");
  ASSERT_EQ(r.output(), "ok\n");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(Bash(*tools, "kill -0 $(cat /tmp/writer.pid) && echo still-waiting").output(), "still-waiting\n")
      << "the snapshot opened a fifo";
  auto copy = ProvisionFrom(d, snap->id());
  EXPECT_EQ(Bash(*Connect(copy), "for p in /workspace/p /tmp/p /dev/shm/p /workspace/waiting; do "
                                 "[ -p $p ] && echo fifo; done")
                .output(),
            "fifo\nfifo\nfifo\nfifo\n");
}

TEST(SnapshotAttackTest, FilesRewrittenWhileSnapshotsRunLeaveEveryChunkMatchingItsName) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  auto r = Bash(*tools, "cat > /tmp/churn.sh <<'EOF'\n"
                        "cd /workspace\n"
                        "while :; do\n"
                        "  head -c 2500000 /dev/urandom > g.new; mv g.new grow\n"
                        "  head -c 700000 /dev/urandom >> grow\n"
                        "  head -c 300000 /dev/urandom | dd of=grow bs=4096 seek=100 conv=notrunc status=none\n"
                        "done\n"
                        "EOF\n"
                        "setsid sh /tmp/churn.sh >/dev/null 2>&1 </dev/null & "
                        "until [ -e /workspace/grow ]; do sleep 0.01; done; echo churning");
  ASSERT_EQ(r.output(), "churning\n");
  std::string last;
  for (int i = 0; i < 6; ++i) {
    auto snap = d.client().Snapshot(box.id(), "alice");
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    last = snap->id();
  }
  const auto chunks = FilesBelow(Chunks(d));
  EXPECT_FALSE(chunks.empty());
  for (const auto& [path, content] : chunks) {
    EXPECT_EQ(Hex(Sha256(content)), fs::path(path).filename().string()) << path;
    EXPECT_LE(content.size(), kChunkBytes) << path;
  }
  // Every chunk the last snapshot names is read back and checked by the restore.
  auto copy = ProvisionFrom(d, last);
  EXPECT_THAT(Bash(*Connect(copy), "ls /workspace").output(), HasSubstr("grow"));
}

// The freezer is asked to stop a sandbox that forks as fast as it can (to keep its cgroup
// FREEZING) while snapshots run. Each snapshot either completes or fails with a message;
// either way the sandbox is thawed after it: it answers, and its forking loop still runs.
TEST(SnapshotAttackTest, ASandboxForkingWhileSnapshotsRunIsThawedAfterEach) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  auto tools = Connect(box);
  auto r = Bash(*tools, "cat > /tmp/forks.sh <<'EOF'\n"
                        "while :; do /bin/true & /bin/true & wait; echo x >> /workspace/ticks; done\n"
                        "EOF\n"
                        "setsid sh /tmp/forks.sh >/dev/null 2>&1 </dev/null & "
                        "until [ -s /workspace/ticks ]; do sleep 0.01; done; echo forking");
  ASSERT_EQ(r.output(), "forking\n");
  for (int i = 0; i < 6; ++i) {
    auto snap = d.client().Snapshot(box.id(), "alice");
    if (!snap.ok()) {
      EXPECT_FALSE(snap.status().message().empty());
    }
    // Thawed: the agent answers, and the loop goes on adding ticks.
    auto after = Bash(*tools, "n=$(wc -l < /workspace/ticks); until [ $(wc -l < /workspace/ticks) -gt $n ]; do "
                              "sleep 0.01; done; echo ticking");
    EXPECT_EQ(after.output(), "ticking\n") << "snapshot " << i;
  }
  EXPECT_EQ(d.client().Get(box.id())->state(), v1::SANDBOX_STATE_READY);
}

TEST(SnapshotAttackTest, ATebibyteSparseFileIsSnapshottedUnderAFewMegabyteCapAndRestoredSparse) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0", "--snapshot-bytes-per-owner", "2000000"});
  auto box = ProvisionOwned(d, "alice");
  auto r = Bash(*Connect(box), "set -e; truncate -s 1T /workspace/huge; printf end | "
                               "dd of=/workspace/huge bs=1 seek=$((1099511627776 - 3)) conv=notrunc status=none; "
                               "echo ok");
  ASSERT_EQ(r.output(), "ok\n");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->logical_bytes(), uint64_t{1} << 40);
  EXPECT_LE(snap->data_bytes(), 65536u) << "holes are not data";
  auto copy = ProvisionFrom(d, snap->id());
  EXPECT_EQ(Bash(*Connect(copy), "stat -c %s /workspace/huge; tail -c 3 /workspace/huge; echo; "
                                 "[ $(du -k /workspace/huge | cut -f1) -lt 64 ] && echo sparse")
                .output(),
            "1099511627776\nend\nsparse\n");
}

TEST(SnapshotAttackTest, AChunkSwappedForAFifoFailsTheRestoreWithDataLossAndStartsNothing) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = ProvisionOwned(d, "alice");
  Bash(*Connect(box), "head -c 100000 /dev/urandom > /workspace/data.bin");
  auto snap = d.client().Snapshot(box.id(), "alice");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  const auto chunks = FilesBelow(Chunks(d));
  ASSERT_FALSE(chunks.empty());
  ASSERT_TRUE(fs::remove(chunks[0].first));
  ASSERT_EQ(mkfifo(chunks[0].first.c_str(), 0600), 0);  // no writer: a blocking open never returns

  v1::ProvisionRequest req;
  req.set_owner("alice");
  req.set_from_snapshot(snap->id());
  auto copy = d.client().ProvisionWith(req);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.status().code(), StatusCode::kCorruption) << copy.status().ToString();
  EXPECT_THAT(copy.status().message(), HasSubstr("not a regular file"));
  EXPECT_EQ(d.RuncContainers(), std::vector<std::string>{box.id()});
}

}  // namespace
}  // namespace sinew::sandbox::testing
