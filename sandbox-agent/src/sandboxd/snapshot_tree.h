// Copies a directory tree a sandbox wrote into snapshot entries and content-addressed
// chunks, and writes such entries back into another (empty) directory.
//
// Every byte of the source is treated as hostile: the walk never follows a symlink
// (symlinks are stored as their text), stays on the root's file system, reads only
// regular files (opened O_PATH, checked, then reopened: a device node or fifo is never
// opened for reading), stores holes and zero-filled chunks as nothing, and bounds the
// number of entries and the depth. Restore checks every entry first (each path component
// non-empty and not "." or "..", parents created by the same tree as directories, hard
// links only to earlier files of the tree) and then creates everything with *at calls
// relative to directories it opened itself with O_NOFOLLOW, with O_EXCL, after removing
// (unfollowed) what a sandbox may have planted at the name: it never writes outside the
// root it was given.
//
// Thread-safety: pure functions; the sink and source must be usable from the caller's thread.
#pragma once

#include <cstdint>
#include <map>
#include <vector>
#include <string>
#include <string_view>

#include "sinew/proto/sandbox_snapshot.pb.h"
#include "sinew/status.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

inline constexpr uint64_t kChunkBytes = 1 << 20;

// Where captured file data goes: stores `data` under `sha256` (32 raw bytes); returns
// whether the bytes were new to the store.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  [[nodiscard]] virtual Result<bool> Put(const std::string& sha256, std::string_view data) = 0;
  // Keeps a chunk the sink already holds for this capture, without its data; false when
  // it holds no such chunk (the caller then reads and puts the data).
  virtual bool Pin(const std::string& sha256) = 0;
};

// Where restored file data comes from; kCorruption when the stored bytes do not hash to
// `sha256`.
class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // The chunk's bytes, checked against its hash (kCorruption when they do not match).
  [[nodiscard]] virtual Result<std::string> Get(const std::string& sha256) const = 0;
  // Writes the chunk (`length` bytes) to `fd` at `offset`, checked as Get checks it.
  // Safe to call from several threads at once. Default: Get, then pwrite.
  [[nodiscard]] virtual Status CopyTo(const std::string& sha256, uint64_t length, int fd, uint64_t offset) const;
};

struct CaptureLimits {
  uint64_t max_entries = 1'000'000;
  uint32_t max_depth = 128;
};

// What a capture saw of each regular file, by path: a later capture of the same tree
// reuses a file's extents, without reading or hashing it, when its inode, size, mtime
// and ctime are all unchanged (ctime is set by the kernel on every change; the sandbox
// cannot set it) and the sink still holds its chunks.
struct CachedFile {
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  std::vector<v1::SnapshotExtent> extents;
};
using CaptureCache = std::map<std::string, CachedFile>;

struct CaptureStats {
  uint64_t logical_bytes = 0;  // apparent sizes of regular files
  uint64_t data_bytes = 0;     // bytes in stored extents
  uint64_t added_bytes = 0;    // bytes of extents new to the sink
  uint32_t entries = 0;
  uint32_t skipped = 0;        // device nodes, sockets, other file systems
  uint32_t reused = 0;         // files whose extents came from the cache unread
};

// Opens the directory `rel` ('/'-separated; no empty, "." or ".." component) below
// `root_fd`, each component with O_NOFOLLOW: a symlink anywhere on the way is an error.
[[nodiscard]] Result<UniqueFd> OpenBeneath(int root_fd, const std::string& rel);

// Writes all of `data` to `fd` at `offset` (pwrite, again after a short write or EINTR).
[[nodiscard]] Status WriteAll(int fd, std::string_view data, uint64_t offset);

// SHA-256 of `data`, 32 raw bytes.
std::string Sha256(std::string_view data);

// Walks the directory `root_fd` (not followed itself: the caller opened it). Owners are
// stored relative to `uid_base` (the sandbox's first host uid; 0 without a user
// namespace), ids outside its range as 65534. Adds to `stats`.
// `previous` (may be null): the cache of an earlier capture of this tree; `next` (may be
// null) is filled with this capture's.
[[nodiscard]] Result<v1::SnapshotTree> CaptureTree(int root_fd, const std::string& root_name,
                                                   ChunkSink& sink, uint32_t uid_base,
                                                   const CaptureLimits& limits, CaptureStats& stats,
                                                   const CaptureCache* previous = nullptr,
                                                   CaptureCache* next = nullptr);

// kCorruption when an entry could write outside its root or is malformed; says which.
[[nodiscard]] Status ValidateTree(const v1::SnapshotTree& tree);

// Creates the entries of `tree` below the directory `root_fd`, owners shifted to
// `uid_base`. What already stands at an entry's name is removed itself, never followed (a
// symlink planted there is replaced), except that a directory is kept where the tree has
// one, and is an error where it has something else. Each entry is created with
// the calling thread's file-system ids set to its owner's host ids (restored after), so
// a restore has no more rights than that owner. Validates first: on a malformed tree
// nothing is written.
[[nodiscard]] Status RestoreTree(const v1::SnapshotTree& tree, int root_fd, const ChunkSource& source,
                                 uint32_t uid_base);

}  // namespace sinew::sandbox
