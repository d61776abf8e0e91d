#include "sandboxd/snapshot_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "auth/agent_proof.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

namespace fs = std::filesystem;

namespace {

// A record lists at most CaptureLimits' million entries per tree; far below this.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;

std::string Hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

Result<std::string> Unhex(const std::string& hex) {
  if (hex.size() != 64) return Status::InvalidArgument("not a chunk name");
  std::string raw;
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument("not a chunk name");
    raw += static_cast<char>(hi * 16 + lo);
  }
  return raw;
}

Status SyncDir(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || fsync(fd.get()) != 0) return Status::IOError("cannot sync " + dir + ": " + std::strerror(errno));
  return Status::Ok();
}

// Reads the regular file `path`, at most `max_bytes` of it. Whatever stands there is
// checked before a byte is read: a symlink is not followed, a fifo or device is opened
// without blocking and refused, and a file larger than `max_bytes` is refused unread.
Result<std::string> ReadWhole(const std::string& path, uint64_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " is missing");
    if (errno == ELOOP) return Status::Corruption(path + " is a symlink, not a file of the store");
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) return Status::IOError("cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Corruption(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::Corruption(path + " holds " + std::to_string(st.st_size) + " bytes, more than the " +
                              std::to_string(max_bytes) + " it may");
  }
  std::string out(static_cast<size_t>(st.st_size) + 1, '\0');  // one more: a file that grew is seen
  size_t have = 0;
  while (have < out.size()) {
    ssize_t n = read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > max_bytes) return Status::Corruption(path + " grew past " + std::to_string(max_bytes) + " bytes");
  out.resize(have);
  return out;
}

// Whether `path` is a directory itself (lstat: a symlink to one is not).
bool IsRealDir(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::map<std::string, uint64_t> RecordChunks(const v1::SnapshotRecord& record) {
  std::map<std::string, uint64_t> out;
  for (const auto& t : record.trees()) {
    for (const auto& e : t.entries()) {
      for (const auto& x : e.extents()) out[x.sha256()] = x.length();
    }
  }
  return out;
}

SnapshotStore::Writer::~Writer() {
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (const auto& h : pinned_) store_.Unref(h);
}

Result<bool> SnapshotStore::Writer::Put(const std::string& sha256, std::string_view data) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  auto it = store_.chunks_.find(sha256);
  bool fresh = it == store_.chunks_.end() || it->second.refs == 0;
  const std::string path = store_.ChunkPath(sha256);
  if (fresh) {
    // Held under the lock: no Delete can collect it between the write and the pin.
    SINEW_RETURN_IF_ERROR(store_.WriteAtomically(path, data));
  }
  store_.Ref(sha256, data.size());
  if (struct stat st{}; fresh && lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    store_.chunks_[sha256].checked = IdOf(st);  // written from the bytes the caller hashed
  }
  pinned_.push_back(sha256);
  return fresh;
}

bool SnapshotStore::Writer::Pin(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  auto it = store_.chunks_.find(sha256);
  if (it == store_.chunks_.end() || it->second.refs == 0) return false;
  ++it->second.refs;
  pinned_.push_back(sha256);
  return true;
}

Result<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(const std::string& dir, uint64_t owner_cap_bytes) {
  std::unique_ptr<SnapshotStore> store(new SnapshotStore(dir, owner_cap_bytes));
  SINEW_RETURN_IF_ERROR(store->Load());
  return store;
}

Status SnapshotStore::Load() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Status::IOError("cannot create " + dir_ + ": " + ec.message());
  // The store's own directories are never followed through a symlink: one planted there
  // would send chunk writes, and the deletions below, to another directory.
  for (const std::string& d : {dir_, dir_ + "/chunks", dir_ + "/records", dir_ + "/tmp"}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::IOError("cannot create " + d + ": " + std::strerror(errno));
    }
    if (!IsRealDir(d)) {
      return Status::FailedPrecondition("snapshot store path " + d +
                                        " is not a directory (a symlink or a file); give the store's real path, "
                                        "and move what stands there aside");
    }
  }
  {
    UniqueFd fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0 || fchmod(fd.get(), 0700) != 0) {
      return Status::IOError("cannot open " + dir_ + ": " + std::strerror(errno));
    }
  }
  // remove_all never follows a symlink it meets; tmp itself was checked above.
  for (const auto& e : fs::directory_iterator(dir_ + "/tmp", ec)) fs::remove_all(e.path(), ec);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : fs::directory_iterator(dir_ + "/records", ec)) {
    const std::string path = e.path().string();
    if (e.path().extension() != ".pb") continue;
    auto text = ReadWhole(path, kMaxRecordBytes);
    v1::SnapshotRecord record;
    if (!text.ok() || !record.ParseFromString(*text) || record.info().id() + ".pb" != e.path().filename()) {
      spdlog::warn("snapshot record {} is unreadable; moved aside to {}.bad", path, path);
      fs::rename(path, path + ".bad", ec);
      continue;
    }
    for (const auto& [h, size] : RecordChunks(record)) Ref(h, size);
    records_[record.info().id()] = std::move(record);
  }
  // Chunks no record refers to: left by a capture or a delete that a crash cut short.
  uint64_t collected = 0;
  // Anything there that is not a directory of chunk files (a symlink above all: listing
  // through it would delete another directory's files) is removed itself, unfollowed.
  for (const auto& sub : fs::directory_iterator(dir_ + "/chunks", ec)) {
    std::error_code ec2;
    if (!IsRealDir(sub.path().string())) {
      spdlog::warn("snapshot store: {} is not a directory; removed", sub.path().string());
      fs::remove(sub.path(), ec2);
      continue;
    }
    for (const auto& f : fs::directory_iterator(sub.path(), ec2)) {
      auto raw = Unhex(f.path().filename().string());
      struct stat st{};
      const bool regular = lstat(f.path().c_str(), &st) == 0 && S_ISREG(st.st_mode);
      if (raw.ok() && chunks_.count(*raw) && regular) continue;
      if (!regular) spdlog::warn("snapshot store: {} is not a regular file; removed", f.path().string());
      fs::remove_all(f.path(), ec2);
      ++collected;
    }
  }
  spdlog::info("snapshot store {}: {} snapshots, {} chunks ({} unreferenced ones collected)", dir_,
               records_.size(), chunks_.size(), collected);
  return Status::Ok();
}

std::string SnapshotStore::ChunkPath(const std::string& sha256) const {
  std::string hex = Hex(sha256);
  return dir_ + "/chunks/" + hex.substr(0, 2) + "/" + hex;
}

std::string SnapshotStore::RecordPath(const std::string& id) const { return dir_ + "/records/" + id + ".pb"; }

Status SnapshotStore::WriteAtomically(const std::string& path, std::string_view data) const {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (!IsRealDir(target.parent_path().string())) {
    return Status::IOError("cannot write " + path + ": its directory is not a directory of the store (a symlink?)");
  }
  const std::string tmp = dir_ + "/tmp/" + RandomHex(8);
  {
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return Status::IOError("cannot create " + tmp + ": " + std::strerror(errno));
    std::string_view rest = data;
    while (!rest.empty()) {
      ssize_t n = write(fd.get(), rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        unlink(tmp.c_str());
        return Status::IOError("cannot write " + tmp + ": " + std::strerror(err));
      }
      rest.remove_prefix(static_cast<size_t>(n));
    }
    if (fsync(fd.get()) != 0) {
      unlink(tmp.c_str());
      return Status::IOError("cannot sync " + tmp + ": " + std::strerror(errno));
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::IOError("cannot rename to " + path + ": " + std::strerror(err));
  }
  return SyncDir(target.parent_path().string());
}

// REQUIRES: mu_ held.
void SnapshotStore::Ref(const std::string& sha256, uint64_t size) {
  Chunk& c = chunks_[sha256];
  ++c.refs;
  c.size = size;
}

// REQUIRES: mu_ held.
void SnapshotStore::Unref(const std::string& sha256) {
  auto it = chunks_.find(sha256);
  if (it == chunks_.end()) return;
  if (--it->second.refs > 0) return;
  chunks_.erase(it);
  std::error_code ec;
  fs::remove(ChunkPath(sha256), ec);
}

// REQUIRES: mu_ held.
uint64_t SnapshotStore::OwnerBytesLocked(const std::string& owner, const std::set<std::string>& extra) const {
  std::set<std::string> seen = extra;
  uint64_t bytes = 0;
  for (const auto& h : extra) {
    auto it = chunks_.find(h);
    if (it != chunks_.end()) bytes += it->second.size;
  }
  for (const auto& [id, r] : records_) {
    if (r.info().owner() != owner) continue;
    for (const auto& [h, size] : RecordChunks(r)) {
      if (seen.insert(h).second) bytes += size;
    }
  }
  return bytes;
}

Result<v1::SnapshotInfo> SnapshotStore::Commit(std::unique_ptr<Writer> writer, v1::SnapshotRecord record) {
  std::map<std::string, uint64_t> refs = RecordChunks(record);
  std::set<std::string> hashes;
  for (const auto& [h, size] : refs) hashes.insert(h);
  v1::SnapshotInfo info = record.info();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string& owner = info.owner();
    if (owner_cap_ > 0) {
      const uint64_t after = OwnerBytesLocked(owner, hashes);
      if (after > owner_cap_) {
        return Status::ResourceExhausted(
            "snapshot refused: the snapshots of owner '" + owner + "' would hold " + std::to_string(after) +
            " bytes, above the cap of " + std::to_string(owner_cap_) +
            " bytes per owner (--snapshot-bytes-per-owner); delete snapshots of this owner first");
      }
    }
    std::string bytes;
    if (!record.SerializeToString(&bytes)) return Status::Internal("cannot serialize a snapshot record");
    SINEW_RETURN_IF_ERROR(WriteAtomically(RecordPath(info.id()), bytes));
    for (const auto& [h, size] : refs) Ref(h, size);
    records_[info.id()] = std::move(record);
  }
  writer.reset();  // its pins go once the record's references exist
  return info;
}

Result<v1::SnapshotRecord> SnapshotStore::Load(const std::string& id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end() || it->second.info().owner() != owner) {
    return Status::NotFound("no snapshot with id '" + id + "'");
  }
  return it->second;
}

Result<v1::SnapshotInfo> SnapshotStore::Delete(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end() || it->second.info().owner() != owner) {
    return Status::NotFound("no snapshot with id '" + id + "'");
  }
  std::error_code ec;
  fs::remove(RecordPath(id), ec);
  if (ec) return Status::IOError("cannot remove the record of " + id + ": " + ec.message());
  SINEW_RETURN_IF_ERROR(SyncDir(dir_ + "/records"));
  v1::SnapshotRecord record = std::move(it->second);
  records_.erase(it);
  for (const auto& [h, size] : RecordChunks(record)) Unref(h);
  return record.info();
}

std::vector<v1::SnapshotInfo> SnapshotStore::List(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::SnapshotInfo> out;
  for (const auto& [id, r] : records_) {
    if (r.info().owner() == owner) out.push_back(r.info());
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.created_unix_ms() < b.created_unix_ms(); });
  return out;
}

std::vector<v1::SnapshotRecord> SnapshotStore::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::SnapshotRecord> out;
  for (const auto& [id, r] : records_) out.push_back(r);
  return out;
}

uint64_t SnapshotStore::OwnerBytes(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  return OwnerBytesLocked(owner, {});
}

uint64_t SnapshotStore::chunk_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_.size();
}

uint64_t SnapshotStore::chunk_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [h, c] : chunks_) bytes += c.size;
  return bytes;
}

Result<std::string> SnapshotStore::Get(const std::string& sha256) const {
  auto data = ReadWhole(ChunkPath(sha256), kChunkBytes);
  if (!data.ok()) {
    // A record refers to it: missing or unreadable, the snapshot has lost data.
    if (data.status().code() == StatusCode::kNotFound) return Status::Corruption("chunk " + Hex(sha256) + " is missing");
    return data.status();
  }
  if (Sha256(*data) != sha256) return Status::Corruption("chunk " + Hex(sha256) + " does not match its hash");
  return std::move(*data);
}

SnapshotStore::FileId SnapshotStore::IdOf(const struct stat& st) {
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

void SnapshotStore::Checked(const std::string& sha256, const FileId& file) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = chunks_.find(sha256); it != chunks_.end()) it->second.checked = file;
}

Status SnapshotStore::CopyTo(const std::string& sha256, uint64_t length, int fd, uint64_t offset) const {
  const std::string path = ChunkPath(sha256);
  FileId known;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = chunks_.find(sha256); it != chunks_.end()) known = it->second.checked;
  }
  UniqueFd in(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (in.get() < 0) {
    if (errno == ENOENT) return Status::Corruption("chunk " + Hex(sha256) + " is missing");
    if (errno == ELOOP) return Status::Corruption(path + " is a symlink, not a file of the store");
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st{};
  if (fstat(in.get(), &st) != 0) return Status::IOError("cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Corruption(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) != length) {
    return Status::Corruption("chunk " + Hex(sha256) + " holds " + std::to_string(st.st_size) + " bytes, not " +
                              std::to_string(length));
  }
  const FileId id = IdOf(st);
  const bool checked = known.ino != 0 && id == known;
  if (checked) {
    loff_t from = 0, to = static_cast<loff_t>(offset);
    uint64_t left = length;
    while (left > 0) {
      ssize_t n = copy_file_range(in.get(), &from, fd, &to, left, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // across file systems (EXDEV): copied through a buffer below
      left -= static_cast<uint64_t>(n);
    }
    if (left == 0) return Status::Ok();
  }
  // Through this thread's buffer (reused: a restore copies many chunks), checked against
  // its hash unless known; remembered once it matches and did not change while read.
  thread_local std::string buffer;
  if (buffer.size() < length) buffer.resize(std::max<uint64_t>(length, kChunkBytes));
  std::string_view data(buffer.data(), length);
  size_t have = 0;
  while (have < length) {
    ssize_t n = pread(in.get(), buffer.data() + have, length - have, static_cast<off_t>(have));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) return Status::Corruption("chunk " + Hex(sha256) + " shrank while it was read");
    have += static_cast<size_t>(n);
  }
  if (!checked && Sha256(data) != sha256) {
    return Status::Corruption("chunk " + Hex(sha256) + " does not match its hash");
  }
  SINEW_RETURN_IF_ERROR(WriteAll(fd, data, offset));
  if (checked) return Status::Ok();
  if (struct stat after{}; fstat(in.get(), &after) == 0 && IdOf(after) == id) Checked(sha256, id);
  return Status::Ok();
}

}  // namespace sinew::sandbox
