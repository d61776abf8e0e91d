// The tree copy on real directories (no containers): what a hostile sandbox can leave in
// its workspace (symlinks to host files, hard links, device nodes, fifos, huge sparse
// files, files rewritten or swapped during the capture, forged records) is stored as
// itself and never lets a restore read or write outside its directories.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "snapshot_store_fixture.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace ::sinew::sandbox::testing;  // NOLINT: the fixture's helpers

TEST(SnapshotTreeTest, SymlinkToAHostSecretIsStoredAsALinkAndNeverFollowed) {
  Fixture f;
  ASSERT_EQ(symlink("/etc/shadow", (f.src.path() + "/shadow").c_str()), 0);
  ASSERT_EQ(symlink("../../../../etc", (f.src.path() + "/up").c_str()), 0);
  CaptureStats stats;
  auto info = f.Snapshot("s1", "alice", &stats);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(stats.data_bytes, 0u) << "nothing of /etc/shadow or /etc may be read";
  EXPECT_EQ(f.store->chunk_count(), 0u);
  auto record = f.store->Load("s1", "alice");
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->trees(0).entries_size(), 2);
  EXPECT_EQ(record->trees(0).entries(0).kind(), v1::SnapshotEntry::SYMLINK);
  EXPECT_EQ(record->trees(0).entries(0).target(), "/etc/shadow");

  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  struct stat st{};
  ASSERT_EQ(lstat((f.dst.path() + "/shadow").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(fs::read_symlink(f.dst.path() + "/shadow"), "/etc/shadow");
}

TEST(SnapshotTreeTest, HardLinkToAFileOutsideBecomesAnIndependentCopy) {
  Fixture f;
  TempDir outside;
  WriteFile(outside.path() + "/host-file", "host data");
  ASSERT_EQ(link((outside.path() + "/host-file").c_str(), (f.src.path() + "/a").c_str()), 0);
  ASSERT_EQ(link((outside.path() + "/host-file").c_str(), (f.src.path() + "/b").c_str()), 0);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_EQ(ReadFile(f.dst.path() + "/a"), "host data");
  struct stat host{}, a{}, b{};
  ASSERT_EQ(stat((outside.path() + "/host-file").c_str(), &host), 0);
  ASSERT_EQ(stat((f.dst.path() + "/a").c_str(), &a), 0);
  ASSERT_EQ(stat((f.dst.path() + "/b").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, host.st_ino) << "a restore must never link to a host file";
  EXPECT_EQ(a.st_ino, b.st_ino) << "links inside the tree stay links to each other";
  EXPECT_EQ(a.st_nlink, 2u);
  WriteFile(f.dst.path() + "/a", "changed");
  EXPECT_EQ(ReadFile(outside.path() + "/host-file"), "host data");
}

TEST(SnapshotTreeTest, DeviceNodesAreSkippedAndFifosKeptWithoutBlocking) {
  if (geteuid() != 0) GTEST_SKIP() << "mknod of a device node needs root";
  Fixture f;
  ASSERT_EQ(mknod((f.src.path() + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(mkfifo((f.src.path() + "/pipe").c_str(), 0640), 0);
  CaptureStats stats;
  ASSERT_TRUE(f.Snapshot("s1", "alice", &stats).ok());
  EXPECT_EQ(stats.skipped, 1u);
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(f.dst.path() + "/null")));
  struct stat st{};
  ASSERT_EQ(lstat((f.dst.path() + "/pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// A sink that runs `hook` once, on the first Put: while the capture is reading a file,
// which is when a racing process in the sandbox would act.
class HookedSink : public ChunkSink {
 public:
  HookedSink(ChunkSink& inner, std::function<void()> hook) : inner_(inner), hook_(std::move(hook)) {}
  Result<bool> Put(const std::string& sha256, std::string_view data) override {
    if (hook_) std::exchange(hook_, nullptr)();
    return inner_.Put(sha256, data);
  }
  bool Pin(const std::string& sha256) override { return inner_.Pin(sha256); }

 private:
  ChunkSink& inner_;
  std::function<void()> hook_;
};

// Captures f.src with `hook` run during the first Put and commits it as "s1".
Result<v1::SnapshotRecord> CaptureRacing(Fixture& f, std::function<void()> hook) {
  auto writer = f.store->NewWriter();
  HookedSink sink(*writer, std::move(hook));
  CaptureStats stats;
  int fd = OpenDir(f.src.path());
  auto tree = CaptureTree(fd, "workspace", sink, 0, CaptureLimits(), stats);
  close(fd);
  if (!tree.ok()) return tree.status();
  v1::SnapshotRecord record;
  record.mutable_info()->set_id("s1");
  record.mutable_info()->set_owner("alice");
  *record.add_trees() = *tree;
  SINEW_RETURN_IF_ERROR(f.store->Commit(std::move(writer), record).status());
  return record;
}

TEST(SnapshotTreeTest, AFileRewrittenAndGrownWhileItIsReadIsStoredAsTheBytesReadEachUnderItsHash) {
  Fixture f;
  const std::string before = RandomBytes(3 * kChunkBytes, 21);
  const std::string after = RandomBytes(5 * kChunkBytes, 22);
  WriteFile(f.src.path() + "/big", before);
  // The same inode, rewritten and grown while its first chunk is being stored.
  auto record = CaptureRacing(f, [&] { WriteFile(f.src.path() + "/big", after); });
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  const auto& e = record->trees(0).entries(0);
  EXPECT_EQ(e.size(), 3 * kChunkBytes) << "the size seen when the file was opened";
  for (const auto& x : e.extents()) {
    auto chunk = f.store->Get(x.sha256());
    ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
    EXPECT_EQ(chunk->size(), x.length());
  }
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_EQ(ReadFile(f.dst.path() + "/big"),
            before.substr(0, kChunkBytes) + after.substr(kChunkBytes, 2 * kChunkBytes))
      << "each chunk is the bytes read, a mix of the two versions, never a chunk under another's hash";
}

TEST(SnapshotTreeTest, ADirectorySwappedForASymlinkDuringTheCaptureIsStoredAsTheLink) {
  Fixture f;
  TempDir victim;
  WriteFile(victim.path() + "/secret", "host secret");
  fs::create_directories(f.src.path() + "/a");
  fs::create_directories(f.src.path() + "/b");
  WriteFile(f.src.path() + "/a/f", "read first");  // its read runs the swap
  WriteFile(f.src.path() + "/b/inner", "inside");
  auto record = CaptureRacing(f, [&] {
    fs::rename(f.src.path() + "/b", f.src.path() + "/moved");
    fs::create_directory_symlink(victim.path(), f.src.path() + "/b");
  });
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  std::vector<std::string> paths;
  for (const auto& e : record->trees(0).entries()) {
    paths.push_back(e.path());
    if (e.path() == "b") {
      EXPECT_EQ(e.kind(), v1::SnapshotEntry::SYMLINK);
      EXPECT_EQ(e.target(), victim.path());
    }
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "a/f", "b"}));
  EXPECT_EQ(f.store->chunk_count(), 1u) << "only a/f is data; nothing of the victim was read";
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_EQ(fs::read_symlink(f.dst.path() + "/b"), victim.path());
}

TEST(SnapshotTreeTest, HugeSparseFileStoresOnlyItsDataAndRestoresSparse) {
  Fixture f;
  const std::string path = f.src.path() + "/sparse";
  {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    const off_t tib = off_t{1} << 40;
    ASSERT_EQ(pwrite(fd, "end", 3, tib - 3), 3);
    close(fd);
  }
  CaptureStats stats;
  ASSERT_TRUE(f.Snapshot("s1", "alice", &stats).ok());
  EXPECT_EQ(stats.logical_bytes, uint64_t{1} << 40);
  EXPECT_LE(stats.data_bytes, kChunkBytes);
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  struct stat st{};
  ASSERT_EQ(stat((f.dst.path() + "/sparse").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), uint64_t{1} << 40);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, 2 * kChunkBytes) << "the hole must stay a hole";
  std::ifstream in(f.dst.path() + "/sparse", std::ios::binary);
  in.seekg((off_t{1} << 40) - 3);
  std::string tail(3, '\0');
  in.read(tail.data(), 3);
  EXPECT_EQ(tail, "end");
}

TEST(SnapshotTreeTest, ContentModesTimesAndNestingComeBackFileByFile) {
  Fixture f;
  fs::create_directories(f.src.path() + "/src/deep/er");
  WriteFile(f.src.path() + "/src/main.py", "print('hi')\n");
  WriteFile(f.src.path() + "/src/deep/er/big.bin", RandomBytes(3 * kChunkBytes + 17, 1));
  WriteFile(f.src.path() + "/empty", "");
  chmod((f.src.path() + "/src/main.py").c_str(), 0751);
  chmod((f.src.path() + "/src/deep").c_str(), 0700);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  for (const auto& e : fs::recursive_directory_iterator(f.src.path())) {
    const std::string rel = fs::relative(e.path(), f.src.path()).string();
    struct stat a{}, b{};
    ASSERT_EQ(lstat(e.path().c_str(), &a), 0);
    ASSERT_EQ(lstat((f.dst.path() + "/" + rel).c_str(), &b), 0) << rel;
    EXPECT_EQ(a.st_mode, b.st_mode) << rel;
    EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec) << rel;
    EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec) << rel;
    if (S_ISREG(a.st_mode)) {
      EXPECT_EQ(ReadFile(e.path()), ReadFile(f.dst.path() + "/" + rel)) << rel;
    }
  }
}

TEST(SnapshotTreeTest, ForgedRecordsThatClimbOutAreRefusedAndWriteNothing) {
  TempDir outer;
  const std::string root = outer.path() + "/root";
  fs::create_directories(root);
  struct Store : ChunkSource {
    Result<std::string> Get(const std::string&) const override { return std::string("x"); }
  } source;
  auto attempt = [&](std::vector<std::tuple<std::string, v1::SnapshotEntry::Kind, std::string>> entries) {
    v1::SnapshotTree tree;
    tree.set_root("workspace");
    for (auto& [path, kind, target] : entries) {
      auto& e = *tree.add_entries();
      e.set_path(path);
      e.set_kind(kind);
      e.set_target(target);
      e.set_mode(0644);
    }
    int fd = OpenDir(root);
    Status s = RestoreTree(tree, fd, source, 0);
    close(fd);
    return s;
  };
  using K = v1::SnapshotEntry;
  for (const auto& entries : std::vector<std::vector<std::tuple<std::string, K::Kind, std::string>>>{
           {{"../escape", K::FILE, ""}},
           {{"a", K::DIR, ""}, {"a/../../escape", K::FILE, ""}},
           {{"/etc/escape", K::FILE, ""}},
           {{"link", K::SYMLINK, ".."}, {"link/escape", K::FILE, ""}},
           {{"ok", K::FILE, ""}, {"hl", K::HARDLINK, "../../etc/passwd"}},
           {{"hl", K::HARDLINK, "/etc/passwd"}},
           {{"a", K::FILE, ""}, {"a", K::FILE, ""}},
           {{"a//b", K::FILE, ""}},
       }) {
    Status s = attempt(entries);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << std::get<0>(entries.back()) << ": " << s.ToString();
    EXPECT_TRUE(fs::is_empty(root)) << "nothing may be written for a refused tree";
  }
  std::vector<std::string> outside;
  for (const auto& e : fs::directory_iterator(outer.path())) outside.push_back(e.path().filename());
  EXPECT_EQ(outside, std::vector<std::string>{"root"});
}

TEST(SnapshotTreeTest, RestoreReplacesASymlinkPlantedWhereADirectoryGoesAndWritesNothingThroughIt) {
  Fixture f;
  fs::create_directories(f.src.path() + "/d");
  WriteFile(f.src.path() + "/d/file", "data");
  ASSERT_TRUE(f.Snapshot("s1").ok());
  TempDir victim;
  // What a sandbox might plant in the target: a symlink where a directory goes.
  ASSERT_EQ(symlink(victim.path().c_str(), (f.dst.path() + "/d").c_str()), 0);
  Status s = f.Restore("s1", f.dst.path());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::is_empty(victim.path())) << "restore wrote through a symlink";
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(f.dst.path() + "/d")));
  EXPECT_EQ(ReadFile(f.dst.path() + "/d/file"), "data");
}

TEST(SnapshotTreeTest, RestoreReplacesSymlinksPlantedWhereFilesGoAndLeavesTheirTargetsAlone) {
  Fixture f;
  WriteFile(f.src.path() + "/file", "restored");
  ASSERT_EQ(symlink("inside", (f.src.path() + "/link").c_str()), 0);
  ASSERT_EQ(mkfifo((f.src.path() + "/pipe").c_str(), 0600), 0);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  TempDir victim;
  for (const char* name : {"file", "link", "pipe"}) {
    WriteFile(victim.path() + "/" + name, "host");
    ASSERT_EQ(symlink((victim.path() + "/" + name).c_str(), (f.dst.path() + "/" + name).c_str()), 0);
  }
  Status s = f.Restore("s1", f.dst.path());
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const char* name : {"file", "link", "pipe"}) {
    EXPECT_EQ(ReadFile(victim.path() + "/" + name), "host") << name;
  }
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(f.dst.path() + "/file")));
  EXPECT_EQ(ReadFile(f.dst.path() + "/file"), "restored");
  EXPECT_EQ(fs::read_symlink(f.dst.path() + "/link"), "inside");
  EXPECT_EQ(fs::symlink_status(f.dst.path() + "/pipe").type(), fs::file_type::fifo);
}

TEST(SnapshotTreeTest, RestoreRefusesADirectoryPlantedWhereAFileGoes) {
  Fixture f;
  WriteFile(f.src.path() + "/file", "restored");
  ASSERT_TRUE(f.Snapshot("s1").ok());
  fs::create_directories(f.dst.path() + "/file/kept");
  Status s = f.Restore("s1", f.dst.path());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_TRUE(fs::is_directory(f.dst.path() + "/file/kept"));
}


}  // namespace
}  // namespace sinew::sandbox
