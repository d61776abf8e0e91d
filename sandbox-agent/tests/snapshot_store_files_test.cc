// The snapshot store's own files are not trusted: chunks, records and directories swapped
// for symlinks, fifos or oversized files are refused or removed unfollowed, never read
// through, never blocked on.
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
