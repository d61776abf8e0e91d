// Helpers of the snapshot store and tree tests on real directories (no containers): a
// store in a fresh directory with a source and a destination tree, and small file helpers.
// Test helper, not a double.
//
// Thread-safety: not thread-safe; one per test.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "sandboxd/snapshot_store.h"
#include "sandboxd/snapshot_tree.h"
#include "sinew/testing/subprocess.h"

namespace sinew::sandbox::testing {

using ::sinew::testing::TempDir;

inline void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline int OpenDir(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

inline std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}

// Lower-case hex of raw bytes.
inline std::string Hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// A store below a fresh directory, a source tree to capture and a destination to restore into.
struct Fixture {
  TempDir store_dir{"sinew-snap"}, src{"sinew-snap"}, dst{"sinew-snap"};
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

}  // namespace sinew::sandbox::testing
