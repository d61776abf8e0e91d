// In-process tests of the agent's file transfer (agent/file_transfer.h): the bytes of
// ReadFile and WriteFile, and every refusal, in a temporary workspace on the host (the
// container adds confinement, not logic). Links and fifos stand for what a hostile
// sandbox plants.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agent/file_transfer.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;

class FileTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sinew-transfer-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    config_.workspace = root_ / "ws";
    fs::create_directories(config_.workspace);
    outside_ = root_ / "outside";
    std::ofstream(outside_) << "secret";
  }
  void TearDown() override { fs::remove_all(root_); }

  // Sends `data` as WriteFile chunks of `chunk` bytes announcing `total` bytes.
  Result<v1::WriteFileResult> Write(const std::string& path, const std::string& data,
                                    uint64_t total, size_t chunk = kFileChunkBytes) {
    size_t off = 0;
    bool first = true;
    return ReceiveFile(config_, [&](v1::FileChunk* c) {
      if (!first && off >= data.size()) return false;
      c->Clear();
      if (first) {
        c->set_path(path);
        c->set_total_bytes(total);
      }
      first = false;
      const size_t n = std::min(chunk, data.size() - off);
      c->set_data(data.substr(off, n));
      off += n;
      return true;
    });
  }
  Result<v1::WriteFileResult> Write(const std::string& path, const std::string& data) {
    return Write(path, data, data.size());
  }
  Result<std::string> Read(const std::string& path, uint64_t max_bytes = 0) {
    std::string out;
    size_t chunks = 0;
    Status s = SendFile(config_, path, max_bytes, [&](const v1::FileChunk& c) {
      if (chunks++ == 0) {
        EXPECT_FALSE(c.path().empty());
      }
      out += c.data();
      return true;
    });
    if (!s.ok()) return s;
    return out;
  }
  // Every name in the workspace, recursively (temporary files included).
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(config_.workspace))
      out.push_back(fs::relative(e.path(), config_.workspace).string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string Outside() const {
    std::ifstream in(outside_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path root_, outside_;
  ToolConfig config_;
};

std::string RandomBytes(size_t n) {
  std::mt19937 gen(42);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(gen() & 0xff);
  for (size_t i = 0; i < n; i += 4096) out[i] = '\0';
  return out;
}

TEST_F(FileTransferTest, BinaryBytesGoInAndComeOutIdenticalInChunks) {
  const std::string data = RandomBytes(3 * kFileChunkBytes + 12345);
  auto written = Write("deep/er/blob.bin", data);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->path(), (config_.workspace / "deep/er/blob.bin").string());
  EXPECT_EQ(written->size(), data.size());
  EXPECT_EQ(written->sha256().size(), 64u);
  auto back = Read((config_.workspace / "deep/er/blob.bin").string());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == data);
  // An empty file, too: one chunk each way.
  ASSERT_TRUE(Write("empty", "").ok());
  auto empty = Read("empty");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, "");
  EXPECT_EQ(Names(), (std::vector<std::string>{"deep", "deep/er", "deep/er/blob.bin", "empty"}));
}

TEST_F(FileTransferTest, AReplacedFileKeepsItsModeAndTheSha256IsOfTheBytes) {
  ASSERT_TRUE(Write("run.sh", "old").ok());
  ASSERT_EQ(chmod((config_.workspace / "run.sh").c_str(), 0750), 0);
  auto written = Write("run.sh", "abc");
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->sha256(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(fs::status(config_.workspace / "run.sh").permissions() & fs::perms::all,
            static_cast<fs::perms>(0750));
}

TEST_F(FileTransferTest, PathsOutsideTheWorkspaceAreRefusedAndNothingIsWritten) {
  const std::vector<std::string> paths = {"../outside", "../../etc/passwd", "/etc/passwd", outside_.string(),
                                         config_.workspace.string(), "a/../../outside", ""};
  for (const std::string& path : paths) {
    auto w = Write(path, "x");
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument) << path << ": " << w.status().ToString();
    auto r = Read(path);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << path << ": " << r.status().ToString();
  }
  EXPECT_EQ(Outside(), "secret");
  EXPECT_TRUE(Names().empty());
}

TEST_F(FileTransferTest, LinksPlantedInTheWorkspaceAreNeverFollowedOutOfIt) {
  fs::create_symlink(outside_, config_.workspace / "link");
  fs::create_symlink(root_, config_.workspace / "dirlink");
  fs::create_symlink("/proc/self/environ", config_.workspace / "magic");
  for (const char* path : {"link", "dirlink/outside", "magic"}) {
    auto r = Read(path);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << path << ": " << r.status().ToString();
  }
  auto through_dir = Write("dirlink/outside", "overwritten");
  EXPECT_EQ(through_dir.status().code(), StatusCode::kInvalidArgument) << through_dir.status().ToString();
  auto new_through_dir = Write("dirlink/new", "x");
  EXPECT_EQ(new_through_dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(root_ / "new"));
  // A link out as the final name is refused too, its target untouched.
  EXPECT_EQ(Write("link", "mine").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_symlink(config_.workspace / "link"));
  EXPECT_EQ(Outside(), "secret");
  // A link that stays inside is followed by a read, and replaced (not written through)
  // by a write.
  std::ofstream(config_.workspace / "real") << "inside";
  fs::create_symlink("real", config_.workspace / "inlink");
  auto inside = Read("inlink");
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(*inside, "inside");
  ASSERT_TRUE(Write("inlink", "replaced").ok());
  EXPECT_FALSE(fs::is_symlink(config_.workspace / "inlink"));
  EXPECT_EQ(*Read("real"), "inside");
  EXPECT_EQ(*Read("inlink"), "replaced");
}

TEST_F(FileTransferTest, FifosDirectoriesAndDevicesAreRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((config_.workspace / "fifo").c_str(), 0644), 0);
  fs::create_directories(config_.workspace / "dir");
  fs::create_symlink("/dev/zero", config_.workspace / "zero");
  for (const char* path : {"fifo", "dir", "zero"}) {
    auto r = Read(path);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << path << ": " << r.status().ToString();
  }
  EXPECT_EQ(Write("dir", "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Read("missing").status().code(), StatusCode::kNotFound);
}

TEST_F(FileTransferTest, AFileOverTheCapOrAShortOrLongUploadLeavesNothing) {
  config_.max_transfer_bytes = 1000;
  EXPECT_EQ(Write("big", std::string(1001, 'b')).status().code(), StatusCode::kResourceExhausted);
  // Fewer bytes than announced: the sender went away mid-file.
  EXPECT_EQ(Write("short", std::string(500, 's'), 900, 100).status().code(), StatusCode::kInvalidArgument);
  // More than announced.
  EXPECT_EQ(Write("long", std::string(500, 'l'), 300, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Names().empty()) << "no file and no temporary file is left";
  // An existing file stays as it was when its replacement fails.
  ASSERT_TRUE(Write("kept", "original").ok());
  EXPECT_FALSE(Write("kept", std::string(500, 'x'), 900, 100).ok());
  std::ifstream in(config_.workspace / "kept");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "original");
  EXPECT_EQ(Names(), std::vector<std::string>{"kept"});
  // Reads over the cap, or over the caller's bound, are refused.
  std::ofstream(config_.workspace / "large") << std::string(2000, 'L');
  EXPECT_EQ(Read("large").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Read("kept", 4).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Read("kept", 8).ok());
}

}  // namespace
}  // namespace sinew::sandbox
