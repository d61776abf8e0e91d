// SnapshotStore: sinew-sandboxd's snapshots on the host, content-addressed.
//
// Layout below its directory (root's, 0700):
//   chunks/<2 hex>/<64 hex>   file data, named by SHA-256: bytes shared by snapshots
//                             (repeated snapshots of a sandbox, forks) are stored once
//   records/<id>.pb           one v1::SnapshotRecord per snapshot
//   tmp/                      files being written; emptied on open
// Every file is written to tmp/, fsynced, renamed into place, and its directory fsynced:
// a crash leaves either the old state or the new one. Open() loads the records (so
// snapshots survive a restart) and deletes chunks no record refers to; Delete removes a
// snapshot's chunks that no other snapshot (or capture in progress) refers to.
// Nothing in the store is trusted to be what it should be: its directories are checked
// to be directories (a symlink there is refused by Open, or removed unfollowed when it
// stands among the chunk directories), and every chunk or record is opened without
// following a symlink or blocking on a fifo and checked to be a regular file of bounded
// size (a chunk at most kChunkBytes) before a byte of it is read.
// Each owner's snapshots may hold at most `owner_cap_bytes` of data, each chunk counted
// once per owner (0: no cap).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "sandboxd/snapshot_tree.h"
#include "sinew/proto/sandbox_snapshot.pb.h"
#include "sinew/status.h"

namespace sinew::sandbox {

class SnapshotStore : public ChunkSource {
 public:
  // A capture in progress: the chunks it puts are kept (not collected) until it is
  // committed or destroyed.
  class Writer : public ChunkSink {
   public:
    ~Writer() override;
    Result<bool> Put(const std::string& sha256, std::string_view data) override;
    bool Pin(const std::string& sha256) override;

   private:
    friend class SnapshotStore;
    explicit Writer(SnapshotStore& store) : store_(store) {}
    SnapshotStore& store_;
    std::vector<std::string> pinned_;
  };

  [[nodiscard]] static Result<std::unique_ptr<SnapshotStore>> Open(const std::string& dir,
                                                                    uint64_t owner_cap_bytes);

  std::unique_ptr<Writer> NewWriter() { return std::unique_ptr<Writer>(new Writer(*this)); }

  // Stores `record` (its info.id set by the caller, unique) with the chunks `writer`
  // put. kResourceExhausted, storing nothing, when its owner would pass the cap.
  // Returns the record's info with data sizes filled in.
  [[nodiscard]] Result<v1::SnapshotInfo> Commit(std::unique_ptr<Writer> writer, v1::SnapshotRecord record);

  // kNotFound for an unknown id or one of another owner (the same message for both).
  [[nodiscard]] Result<v1::SnapshotRecord> Load(const std::string& id, const std::string& owner) const;
  [[nodiscard]] Result<v1::SnapshotInfo> Delete(const std::string& id, const std::string& owner);
  std::vector<v1::SnapshotInfo> List(const std::string& owner) const;
  // Every record (for the provisioner's start: paused sandboxes come back from them).
  std::vector<v1::SnapshotRecord> All() const;
  // Data bytes the owner's snapshots hold, each chunk once.
  uint64_t OwnerBytes(const std::string& owner) const;
  uint64_t owner_cap_bytes() const { return owner_cap_; }
  // Chunk files on disk and their bytes (for tests and benchmarks).
  uint64_t chunk_count() const;
  uint64_t chunk_bytes() const;

  Result<std::string> Get(const std::string& sha256) const override;
  // Copies in the kernel (copy_file_range), without hashing again, a chunk file that is
  // the one this store wrote or already checked (same device, inode, size and ctime: the
  // kernel sets ctime on every change); any other is read and checked as Get does.
  Status CopyTo(const std::string& sha256, uint64_t length, int fd, uint64_t offset) const override;

 private:
  SnapshotStore(std::string dir, uint64_t owner_cap) : dir_(std::move(dir)), owner_cap_(owner_cap) {}
  Status Load();
  std::string ChunkPath(const std::string& sha256) const;
  std::string RecordPath(const std::string& id) const;
  // Writes `data` to `path` atomically (tmp file, fsync, rename, fsync of the directory).
  Status WriteAtomically(const std::string& path, std::string_view data) const;
  // REQUIRES: mu_ held.
  void Ref(const std::string& sha256, uint64_t size);
  void Unref(const std::string& sha256);
  uint64_t OwnerBytesLocked(const std::string& owner, const std::set<std::string>& extra) const;

  const std::string dir_;
  const uint64_t owner_cap_;
  mutable std::mutex mu_;
  // The identity of a chunk file known to hold its hash's bytes (written or checked by
  // this process); all zero while unknown.
  struct FileId {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t ctime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  static FileId IdOf(const struct stat& st);
  // Remembers `file` as holding chunk `sha256`'s bytes (if the store still holds it).
  void Checked(const std::string& sha256, const FileId& file) const;
  struct Chunk {
    uint64_t refs = 0;
    uint64_t size = 0;
    FileId checked;
  };
  mutable std::map<std::string, Chunk> chunks_;         // sha256 -> refs; guarded by mu_
  std::map<std::string, v1::SnapshotRecord> records_;   // id -> record; guarded by mu_
};

// The distinct chunks (sha256 -> length) a record refers to.
std::map<std::string, uint64_t> RecordChunks(const v1::SnapshotRecord& record);

}  // namespace sinew::sandbox
