// The snapshot store and the tree copy on real directories (no containers): what a
// hostile sandbox can leave in its workspace (symlinks to host files, hard links, device
// nodes, fifos, huge sparse files, forged records) is stored as itself and never lets a
// restore read or write outside its directories; chunks are shared, collected, capped,
// and survive a reopen.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <utility>

#include "sandboxd/snapshot_store.h"
#include "sandboxd/snapshot_tree.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sinew-snap-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

int OpenDir(const std::string& path) { return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}

struct Fixture {
  TempDir store_dir, src, dst;
  std::unique_ptr<SnapshotStore> store;

  explicit Fixture(uint64_t cap = 0) {
    auto s = SnapshotStore::Open(store_dir.path() + "/store", cap);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(*s);
  }

  // Captures src into a committed snapshot `id` of `owner`.
  Result<v1::SnapshotInfo> Snapshot(const std::string& id, const std::string& owner = "alice",
                                    CaptureStats* stats_out = nullptr) {
    auto writer = store->NewWriter();
    CaptureStats stats;
    int fd = OpenDir(src.path());
    auto tree = CaptureTree(fd, "workspace", *writer, 0, CaptureLimits(), stats);
    close(fd);
    if (!tree.ok()) return tree.status();
    v1::SnapshotRecord record;
    record.mutable_info()->set_id(id);
    record.mutable_info()->set_owner(owner);
    record.mutable_info()->set_added_bytes(stats.added_bytes);
    *record.add_trees() = *tree;
    if (stats_out) *stats_out = stats;
    return store->Commit(std::move(writer), record);
  }

  Status Restore(const std::string& id, const std::string& into, const std::string& owner = "alice") {
    SINEW_ASSIGN_OR_RETURN(v1::SnapshotRecord r, store->Load(id, owner));
    int fd = OpenDir(into);
    Status s = RestoreTree(r.trees(0), fd, *store, 0);
    close(fd);
    return s;
  }
};

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

TEST(SnapshotStoreTest, RepeatedSnapshotsOfUnchangedDataAddNoBytes) {
  Fixture f;
  WriteFile(f.src.path() + "/big", RandomBytes(4 * kChunkBytes, 2));
  auto first = f.Snapshot("s1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->added_bytes(), 4 * kChunkBytes);
  auto second = f.Snapshot("s2");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->added_bytes(), 0u);
  EXPECT_EQ(f.store->chunk_bytes(), 4 * kChunkBytes);
  // One changed byte adds one chunk.
  {
    std::fstream io(f.src.path() + "/big", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(kChunkBytes + 5);
    io.put('!');
  }
  auto third = f.Snapshot("s3");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->added_bytes(), kChunkBytes);
}

TEST(SnapshotStoreTest, AnUnchangedFileIsReusedUnreadAndAChangedOneIsReadEvenWithItsOldMtime) {
  Fixture f;
  const std::string path = f.src.path() + "/big";
  WriteFile(path, RandomBytes(3 * kChunkBytes, 8));
  WriteFile(f.src.path() + "/other", "other");
  auto capture = [&](const CaptureCache* previous, CaptureCache* next, CaptureStats& stats) {
    auto writer = f.store->NewWriter();
    int fd = OpenDir(f.src.path());
    auto tree = CaptureTree(fd, "workspace", *writer, 0, CaptureLimits(), stats, previous, next);
    close(fd);
    EXPECT_TRUE(tree.ok()) << tree.status().ToString();
    v1::SnapshotRecord record;
    record.mutable_info()->set_id("s" + std::to_string(f.store->List("").size()));
    *record.add_trees() = *tree;
    EXPECT_TRUE(f.store->Commit(std::move(writer), record).ok());
    return record.info().id();
  };
  CaptureCache first, second, third;
  CaptureStats s1, s2, s3;
  capture(nullptr, &first, s1);
  EXPECT_EQ(s1.reused, 0u);
  capture(&first, &second, s2);
  EXPECT_EQ(s2.reused, 2u);
  EXPECT_EQ(s2.added_bytes, 0u);
  EXPECT_EQ(s2.data_bytes, s1.data_bytes);
  // Same size, new content, and the old mtime put back: ctime still tells.
  struct stat before{};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  WriteFile(path, RandomBytes(3 * kChunkBytes, 9));
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  const std::string id = capture(&second, &third, s3);
  EXPECT_EQ(s3.reused, 1u) << "only the untouched file";
  EXPECT_EQ(s3.added_bytes, 3 * kChunkBytes);
  ASSERT_TRUE(f.Restore(id, f.dst.path(), "").ok());
  EXPECT_EQ(ReadFile(f.dst.path() + "/big"), ReadFile(path));
}

TEST(SnapshotStoreTest, DeleteCollectsOnlyChunksNoOtherSnapshotUses) {
  Fixture f;
  WriteFile(f.src.path() + "/shared", RandomBytes(kChunkBytes, 3));
  ASSERT_TRUE(f.Snapshot("s1").ok());
  WriteFile(f.src.path() + "/own", RandomBytes(kChunkBytes, 4));
  ASSERT_TRUE(f.Snapshot("s2").ok());
  EXPECT_EQ(f.store->chunk_count(), 2u);
  ASSERT_TRUE(f.store->Delete("s2", "alice").ok());
  EXPECT_EQ(f.store->chunk_count(), 1u);
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_EQ(ReadFile(f.dst.path() + "/shared"), ReadFile(f.src.path() + "/shared"));
  ASSERT_TRUE(f.store->Delete("s1", "alice").ok());
  EXPECT_EQ(f.store->chunk_count(), 0u);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(f.store_dir.path() + "/store/chunks")) {
    files += e.is_regular_file();
  }
  EXPECT_EQ(files, 0u);
}

TEST(SnapshotStoreTest, SnapshotsSurviveAReopenAndStrayChunksAreCollected) {
  TempDir src, dst, dir;
  WriteFile(src.path() + "/f", RandomBytes(kChunkBytes + 1, 5));
  {
    auto store = SnapshotStore::Open(dir.path(), 0);
    ASSERT_TRUE(store.ok());
    auto writer = (*store)->NewWriter();
    CaptureStats stats;
    int fd = OpenDir(src.path());
    auto tree = CaptureTree(fd, "workspace", *writer, 0, CaptureLimits(), stats);
    close(fd);
    ASSERT_TRUE(tree.ok());
    v1::SnapshotRecord r;
    r.mutable_info()->set_id("kept");
    *r.add_trees() = *tree;
    ASSERT_TRUE((*store)->Commit(std::move(writer), r).ok());
  }
  // What a crash in the middle of a capture leaves: a chunk with no record, a tmp file.
  fs::create_directories(dir.path() + "/chunks/ab");
  WriteFile(dir.path() + "/chunks/ab/" + std::string(64, 'a'), "stray");
  WriteFile(dir.path() + "/tmp/partial", "partial");
  auto store = SnapshotStore::Open(dir.path(), 0);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/chunks/ab/" + std::string(64, 'a')));
  EXPECT_FALSE(fs::exists(dir.path() + "/tmp/partial"));
  EXPECT_EQ((*store)->chunk_count(), 2u);
  auto r = (*store)->Load("kept", "");
  ASSERT_TRUE(r.ok());
  int fd = OpenDir(dst.path());
  ASSERT_TRUE(RestoreTree(r->trees(0), fd, **store, 0).ok());
  close(fd);
  EXPECT_EQ(ReadFile(dst.path() + "/f"), ReadFile(src.path() + "/f"));
}

TEST(SnapshotStoreTest, AnotherOwnersSnapshotIsNotFound) {
  Fixture f;
  WriteFile(f.src.path() + "/f", "x");
  ASSERT_TRUE(f.Snapshot("s1", "alice").ok());
  auto load = f.store->Load("s1", "mallory");
  EXPECT_EQ(load.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.store->Delete("s1", "mallory").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(f.store->List("mallory").empty());
  EXPECT_EQ(f.store->List("alice").size(), 1u);
  EXPECT_TRUE(f.store->Load("s1", "alice").ok()) << "a refused delete changes nothing";
}

TEST(SnapshotStoreTest, OwnerCapRefusesWithAMessageAndKeepsNothing) {
  Fixture f(/*cap=*/2 * kChunkBytes);
  WriteFile(f.src.path() + "/a", RandomBytes(kChunkBytes, 6));
  ASSERT_TRUE(f.Snapshot("s1").ok());
  ASSERT_TRUE(f.Snapshot("s2").ok()) << "unchanged data counts once";
  WriteFile(f.src.path() + "/b", RandomBytes(2 * kChunkBytes, 7));
  auto refused = f.Snapshot("s3");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("cap"));
  EXPECT_EQ(f.store->chunk_count(), 1u) << "the refused snapshot's chunks are collected";
  EXPECT_EQ(f.store->List("alice").size(), 2u);
  fs::remove(f.src.path() + "/b");
  EXPECT_TRUE(f.Snapshot("s4", "bob").ok()) << "the cap is per owner";
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

// The chunk file of `data` in the store below `store`.
std::string ChunkFile(const std::string& store, const std::string& data) {
  const std::string hex = Hex(Sha256(data));
  return store + "/chunks/" + hex.substr(0, 2) + "/" + hex;
}

TEST(SnapshotStoreTest, AChunkSwappedForASymlinkToItsOwnBytesIsNotReadThrough) {
  Fixture f;
  const std::string data = RandomBytes(1000, 11);
  WriteFile(f.src.path() + "/a", data);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  TempDir host;
  WriteFile(host.path() + "/same-bytes", data);  // following the link would pass the hash check
  const std::string chunk = ChunkFile(f.store_dir.path() + "/store", data);
  ASSERT_TRUE(fs::remove(chunk));
  ASSERT_EQ(symlink((host.path() + "/same-bytes").c_str(), chunk.c_str()), 0);
  auto got = f.store->Get(Sha256(data));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << got.status().ToString();
  EXPECT_THAT(got.status().message(), HasSubstr("symlink"));
}

TEST(SnapshotStoreTest, AChunkSwappedForAFifoFailsWithoutBlocking) {
  Fixture f;
  const std::string data = RandomBytes(1000, 12);
  WriteFile(f.src.path() + "/a", data);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  const std::string chunk = ChunkFile(f.store_dir.path() + "/store", data);
  ASSERT_TRUE(fs::remove(chunk));
  ASSERT_EQ(mkfifo(chunk.c_str(), 0600), 0);  // no writer: a blocking open never returns
  auto got = f.store->Get(Sha256(data));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << got.status().ToString();
  EXPECT_THAT(got.status().message(), HasSubstr("not a regular file"));
}

TEST(SnapshotStoreTest, AChunkLargerThanAChunkIsRefusedUnread) {
  Fixture f;
  const std::string data = RandomBytes(1000, 13);
  WriteFile(f.src.path() + "/a", data);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  const std::string chunk = ChunkFile(f.store_dir.path() + "/store", data);
  ASSERT_EQ(truncate(chunk.c_str(), off_t{1} << 40), 0);  // 1 TiB, sparse: reading it would never end
  auto got = f.store->Get(Sha256(data));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << got.status().ToString();
  EXPECT_THAT(got.status().message(), HasSubstr("more than the " + std::to_string(kChunkBytes)));
}

TEST(SnapshotStoreTest, AMissingChunkIsCorruptionNotAMissingSnapshot) {
  Fixture f;
  const std::string data = RandomBytes(1000, 14);
  WriteFile(f.src.path() + "/a", data);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  ASSERT_TRUE(fs::remove(ChunkFile(f.store_dir.path() + "/store", data)));
  Status s = f.Restore("s1", f.dst.path());
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
}

TEST(SnapshotStoreTest, OpenRefusesATmpDirectorySwappedForASymlinkAndDeletesNothingThroughIt) {
  TempDir dir, victim;
  const std::string store = dir.path() + "/store";
  ASSERT_TRUE(SnapshotStore::Open(store, 0).ok());
  WriteFile(victim.path() + "/precious", "host");
  fs::remove_all(store + "/tmp");
  ASSERT_EQ(symlink(victim.path().c_str(), (store + "/tmp").c_str()), 0);
  auto opened = SnapshotStore::Open(store, 0);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition) << opened.status().ToString();
  EXPECT_EQ(ReadFile(victim.path() + "/precious"), "host") << "Open emptied tmp/ through a symlink";
}

TEST(SnapshotStoreTest, OpenRefusesAStoreDirectoryThatIsASymlink) {
  TempDir dir;
  ASSERT_TRUE(SnapshotStore::Open(dir.path() + "/real", 0).ok());
  ASSERT_EQ(symlink((dir.path() + "/real").c_str(), (dir.path() + "/link").c_str()), 0);
  auto opened = SnapshotStore::Open(dir.path() + "/link", 0);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition) << opened.status().ToString();
}

TEST(SnapshotStoreTest, OpenRemovesAChunkDirectorySwappedForASymlinkButNotItsTarget) {
  TempDir dir, victim;
  const std::string store = dir.path() + "/store";
  ASSERT_TRUE(SnapshotStore::Open(store, 0).ok());
  WriteFile(victim.path() + "/precious", "host");  // not a chunk name: the collector's prey
  ASSERT_EQ(symlink(victim.path().c_str(), (store + "/chunks/ab").c_str()), 0);
  auto opened = SnapshotStore::Open(store, 0);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(ReadFile(victim.path() + "/precious"), "host") << "Open collected files through a symlink";
  EXPECT_FALSE(fs::exists(fs::symlink_status(store + "/chunks/ab")));
}

TEST(SnapshotStoreTest, AChunkIsNotWrittenIntoAChunkDirectorySwappedForASymlink) {
  Fixture f;
  TempDir victim;
  const std::string data = RandomBytes(1000, 15);
  const std::string chunk = ChunkFile(f.store_dir.path() + "/store", data);
  const std::string parent = fs::path(chunk).parent_path().string();
  fs::remove_all(parent);
  ASSERT_EQ(symlink(victim.path().c_str(), parent.c_str()), 0);
  auto writer = f.store->NewWriter();
  auto put = writer->Put(Sha256(data), data);
  EXPECT_FALSE(put.ok());
  EXPECT_TRUE(fs::is_empty(victim.path())) << "a chunk was written through a symlink";
}

TEST(SnapshotStoreTest, ARecordSwappedForAFifoIsMovedAsideWithoutBlockingOpen) {
  TempDir dir;
  const std::string store = dir.path() + "/store";
  ASSERT_TRUE(SnapshotStore::Open(store, 0).ok());
  ASSERT_EQ(mkfifo((store + "/records/snap-x.pb").c_str(), 0600), 0);
  auto opened = SnapshotStore::Open(store, 0);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->All().size(), 0u);
  EXPECT_EQ(fs::symlink_status(store + "/records/snap-x.pb.bad").type(), fs::file_type::fifo);
}

}  // namespace
}  // namespace sinew::sandbox
