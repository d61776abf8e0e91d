// The snapshot store on real directories (no containers): chunks are shared between
// snapshots, reused unread when unchanged, collected when unreferenced, capped per owner,
// and survive a reopen.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// A restore copies a chunk file this store wrote (or checked) without hashing it again,
// keyed by its device, inode, size and ctime. The attacks: the same bytes count of other
// data written into the chunk file in place with its old mtime put back, and a file of
// the same size renamed over it. Each is caught on the next restore (ctime, inode), which
// fails naming the chunk and writes none of its bytes.
TEST(SnapshotStoreTest, AChunkChangedAfterItWasCheckedIsCaughtOnTheNextRestore) {
  Fixture f;
  const std::string data = RandomBytes(2 * kChunkBytes, 21);
  WriteFile(f.src.path() + "/f", data);
  ASSERT_TRUE(f.Snapshot("s1").ok());
  ASSERT_TRUE(f.Restore("s1", f.dst.path()).ok());
  EXPECT_EQ(ReadFile(f.dst.path() + "/f"), data);
  const std::string chunk = f.store_dir.path() + "/store/chunks/" + Hex(Sha256(data.substr(0, kChunkBytes))).substr(0, 2) +
                            "/" + Hex(Sha256(data.substr(0, kChunkBytes)));
  ASSERT_TRUE(fs::exists(chunk)) << chunk;
  struct stat before{};
  ASSERT_EQ(stat(chunk.c_str(), &before), 0);
  {
    std::fstream io(chunk, std::ios::in | std::ios::out | std::ios::binary);
    const std::string other = RandomBytes(kChunkBytes, 22);
    io.write(other.data(), static_cast<std::streamsize>(other.size()));
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, chunk.c_str(), times, 0), 0);
  TempDir in_place("sinew-snap");
  Status restored = f.Restore("s1", in_place.path());
  EXPECT_EQ(restored.code(), StatusCode::kCorruption) << restored.ToString();
  EXPECT_THAT(restored.message(), HasSubstr("does not match its hash"));
  EXPECT_NE(ReadFile(in_place.path() + "/f").substr(0, kChunkBytes), RandomBytes(kChunkBytes, 22));

  // The right bytes back, checked again on a restore; then a same-sized file renamed over it.
  WriteFile(chunk + ".new", data.substr(0, kChunkBytes));
  ASSERT_EQ(rename((chunk + ".new").c_str(), chunk.c_str()), 0);
  TempDir again("sinew-snap");
  ASSERT_TRUE(f.Restore("s1", again.path()).ok());
  EXPECT_EQ(ReadFile(again.path() + "/f"), data);
  WriteFile(chunk + ".new", RandomBytes(kChunkBytes, 23));
  ASSERT_EQ(rename((chunk + ".new").c_str(), chunk.c_str()), 0);
  TempDir swapped("sinew-snap");
  restored = f.Restore("s1", swapped.path());
  EXPECT_EQ(restored.code(), StatusCode::kCorruption) << restored.ToString();
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

}  // namespace
}  // namespace sinew::sandbox
