#include "sandboxd/snapshot_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "sandboxd/config.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {
namespace {

constexpr uint32_t kNobody = 65534;

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

uint32_t ToSandboxId(uint32_t host_id, uint32_t uid_base) {
  if (uid_base == 0) return host_id;
  if (host_id < uid_base || host_id - uid_base >= kUidRangeSize) return kNobody;
  return host_id - uid_base;
}

uint32_t ToHostId(uint32_t id, uint32_t uid_base) {
  if (id >= kUidRangeSize) id = kNobody;
  return uid_base + id;
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

timespec FromNs(int64_t ns) {
  timespec t{};
  t.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  t.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1'000'000'000;
    t.tv_sec -= 1;
  }
  return t;
}

bool AllZero(std::string_view data) {
  return std::all_of(data.begin(), data.end(), [](char c) { return c == 0; });
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

class Walker {
 public:
  Walker(ChunkSink& sink, uint32_t uid_base, const CaptureLimits& limits, CaptureStats& stats,
         v1::SnapshotTree& tree, const CaptureCache* previous, CaptureCache* next)
      : sink_(sink), uid_base_(uid_base), limits_(limits), stats_(stats), tree_(tree), previous_(previous),
        next_(next) {}

  Status Run(int root_fd) {
    struct stat st{};
    if (fstat(root_fd, &st) != 0) return Errno("stat of the tree's root");
    if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition("the tree's root is not a directory");
    dev_ = st.st_dev;
    return WalkDir(root_fd, "", 0);
  }

 private:
  // Names in `dir_fd`, sorted (a stable order for the same tree).
  Result<std::vector<std::string>> Names(int dir_fd) {
    int copy = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return Errno("dup");
    DIR* d = fdopendir(copy);
    if (d == nullptr) {
      close(copy);
      return Errno("fdopendir");
    }
    rewinddir(d);
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      names.push_back(std::move(n));
      if (names.size() > limits_.max_entries) break;
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  v1::SnapshotEntry& Add(const std::string& path, v1::SnapshotEntry::Kind kind, const struct stat& st) {
    v1::SnapshotEntry& e = *tree_.add_entries();
    e.set_path(path);
    e.set_kind(kind);
    e.set_mode(st.st_mode & 01777);  // never set-id bits
    e.set_uid(ToSandboxId(st.st_uid, uid_base_));
    e.set_gid(ToSandboxId(st.st_gid, uid_base_));
    e.set_mtime_ns(MtimeNs(st));
    ++stats_.entries;
    return e;
  }

  Status WalkDir(int dir_fd, const std::string& rel, uint32_t depth) {
    if (depth > limits_.max_depth) {
      return Status::ResourceExhausted("directories nested deeper than " +
                                       std::to_string(limits_.max_depth) + " at " + rel);
    }
    SINEW_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(dir_fd));
    for (const std::string& name : names) {
      if (stats_.entries >= limits_.max_entries) {
        return Status::ResourceExhausted("more than " + std::to_string(limits_.max_entries) +
                                         " entries to snapshot");
      }
      const std::string path = JoinPath(rel, name);
      // O_PATH with O_NOFOLLOW: a symlink is opened as itself, and nothing (a device, a
      // fifo) is opened for I/O. All later checks use this descriptor, not the name.
      UniqueFd fd(openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == ENOENT) continue;  // removed meanwhile
        return Errno("open " + path);
      }
      struct stat st{};
      if (fstat(fd.get(), &st) != 0) return Errno("stat " + path);
      if (st.st_dev != dev_) {
        ++stats_.skipped;  // another file system mounted inside
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        UniqueFd dir(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        struct stat again{};
        if (dir.get() < 0 || fstat(dir.get(), &again) != 0 || again.st_ino != st.st_ino ||
            again.st_dev != st.st_dev) {
          ++stats_.skipped;  // replaced meanwhile
          continue;
        }
        Add(path, v1::SnapshotEntry::DIR, st);
        SINEW_RETURN_IF_ERROR(WalkDir(dir.get(), path, depth + 1));
      } else if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(fd.get(), "", target, sizeof(target));
        if (n < 0 || n >= static_cast<ssize_t>(sizeof(target))) return Errno("readlink " + path);
        Add(path, v1::SnapshotEntry::SYMLINK, st).set_target(std::string(target, static_cast<size_t>(n)));
      } else if (S_ISREG(st.st_mode)) {
        SINEW_RETURN_IF_ERROR(AddFile(fd.get(), path, st));
      } else if (S_ISFIFO(st.st_mode)) {
        Add(path, v1::SnapshotEntry::FIFO, st);
      } else {
        ++stats_.skipped;  // device nodes and sockets are not kept
      }
    }
    return Status::Ok();
  }

  Status AddFile(int path_fd, const std::string& path, const struct stat& st) {
    if (st.st_nlink > 1) {
      auto key = std::make_pair(st.st_dev, st.st_ino);
      auto seen = links_.find(key);
      if (seen != links_.end()) {
        Add(path, v1::SnapshotEntry::HARDLINK, st).set_target(seen->second);
        return Status::Ok();
      }
      links_.emplace(key, path);
    }
    // Reopened through the O_PATH descriptor: the same inode, checked to be a regular file.
    const std::string proc = "/proc/self/fd/" + std::to_string(path_fd);
    UniqueFd fd(open(proc.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) return Errno("reopen " + path);
    struct stat again{};
    if (fstat(fd.get(), &again) != 0 || !S_ISREG(again.st_mode) || again.st_ino != st.st_ino) {
      return Status::IOError("file " + path + " changed while it was read");
    }
    v1::SnapshotEntry& e = Add(path, v1::SnapshotEntry::FILE, st);
    const uint64_t size = static_cast<uint64_t>(again.st_size);
    e.set_size(size);
    stats_.logical_bytes += size;
    CachedFile seen;
    seen.ino = again.st_ino;
    seen.size = size;
    seen.mtime_ns = MtimeNs(again);
    seen.ctime_ns = static_cast<int64_t>(again.st_ctim.tv_sec) * 1'000'000'000 + again.st_ctim.tv_nsec;
    if (Reuse(path, seen, e)) {
      if (next_ != nullptr) (*next_)[path] = std::move(seen);
      return Status::Ok();
    }
    SINEW_RETURN_IF_ERROR(ReadData(fd.get(), path, size, e));
    if (next_ != nullptr) {
      seen.extents.assign(e.extents().begin(), e.extents().end());
      (*next_)[path] = std::move(seen);
    }
    return Status::Ok();
  }

  // Takes the extents of an unchanged file from the previous capture.
  bool Reuse(const std::string& path, CachedFile& seen, v1::SnapshotEntry& e) {
    if (previous_ == nullptr) return false;
    auto it = previous_->find(path);
    if (it == previous_->end()) return false;
    const CachedFile& old = it->second;
    if (old.ino != seen.ino || old.size != seen.size || old.mtime_ns != seen.mtime_ns ||
        old.ctime_ns != seen.ctime_ns) {
      return false;
    }
    for (const auto& x : old.extents) {
      if (!sink_.Pin(x.sha256())) return false;
    }
    for (const auto& x : old.extents) {
      *e.add_extents() = x;
      stats_.data_bytes += x.length();
    }
    seen.extents = old.extents;
    ++stats_.reused;
    return true;
  }

  // Reads the data regions of `fd` in chunks, puts each non-zero one into the sink.
  Status ReadData(int fd, const std::string& path, uint64_t size, v1::SnapshotEntry& e) {
    std::string buf;
    off_t pos = 0;
    while (static_cast<uint64_t>(pos) < size) {
      // Data regions only: holes of sparse files are never read.
      off_t data = lseek(fd, pos, SEEK_DATA);
      if (data < 0) break;  // ENXIO: only a hole is left
      off_t hole = lseek(fd, data, SEEK_HOLE);
      if (hole < 0) hole = static_cast<off_t>(size);
      hole = std::min<off_t>(hole, static_cast<off_t>(size));
      for (off_t off = data; off < hole;) {
        const off_t chunk_end =
            std::min<off_t>(hole, (off / static_cast<off_t>(kChunkBytes) + 1) * static_cast<off_t>(kChunkBytes));
        buf.resize(static_cast<size_t>(chunk_end - off));
        ssize_t n = pread(fd, buf.data(), buf.size(), off);
        if (n < 0) return Errno("read " + path);
        if (n == 0) break;  // truncated meanwhile
        buf.resize(static_cast<size_t>(n));
        if (!AllZero(buf)) {
          std::string hash = Sha256(buf);
          SINEW_ASSIGN_OR_RETURN(bool added, sink_.Put(hash, buf));
          v1::SnapshotExtent& x = *e.add_extents();
          x.set_offset(static_cast<uint64_t>(off));
          x.set_length(buf.size());
          x.set_sha256(hash);
          stats_.data_bytes += buf.size();
          if (added) stats_.added_bytes += buf.size();
        }
        off += n;
      }
      pos = hole;
    }
    return Status::Ok();
  }

  ChunkSink& sink_;
  const uint32_t uid_base_;
  const CaptureLimits& limits_;
  CaptureStats& stats_;
  v1::SnapshotTree& tree_;
  const CaptureCache* previous_;
  CaptureCache* next_;
  dev_t dev_ = 0;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
};

// Splits a validated path into its components.
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// The parent directory of `parts` below `root_fd`, each step opened without following
// symlinks and checked to be a directory.
Result<UniqueFd> OpenParent(int root_fd, const std::vector<std::string>& parts) {
  UniqueFd cur(fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (cur.get() < 0) return Errno("dup");
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    UniqueFd next(openat(cur.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) return Errno("open directory " + parts[i]);
    cur = std::move(next);
  }
  return cur;
}

// Creates files as their owner: this thread's file-system ids are the entry's host ids
// while it exists. A file system mounted in a sandbox's user namespace refuses creation
// by ids it does not map (host root among them), and the restore acts with no more
// rights than the owner itself.
class AsOwner {
 public:
  AsOwner(uid_t uid, gid_t gid) {
    old_gid_ = static_cast<gid_t>(setfsgid(gid));
    old_uid_ = static_cast<uid_t>(setfsuid(uid));
  }
  ~AsOwner() {
    setfsuid(old_uid_);
    setfsgid(old_gid_);
  }
  AsOwner(const AsOwner&) = delete;
  AsOwner& operator=(const AsOwner&) = delete;

 private:
  uid_t old_uid_;
  gid_t old_gid_;
};

// Makes room for the entry `n` in `pfd`: a non-directory already there (a symlink the
// sandbox planted, say) is removed itself, never followed. A directory there is kept
// when `dir_wanted` (*kept is set) and is an error otherwise.
Status ClearPlanted(int pfd, const char* n, const std::string& path, bool dir_wanted, bool* kept) {
  *kept = false;
  struct stat st{};
  if (fstatat(pfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Errno("stat " + path);
  }
  if (S_ISDIR(st.st_mode)) {
    if (dir_wanted) {
      *kept = true;
      return Status::Ok();
    }
    return Status::FailedPrecondition("a directory stands where " + path + " is restored");
  }
  if (unlinkat(pfd, n, 0) != 0 && errno != ENOENT) return Errno("remove what stood at " + path);
  return Status::Ok();
}


// File data of a restore, written after the tree's entries are made, on several threads
// (a restore is what a resume waits for). Files are held open only until their batch is
// written, so a tree of many files never holds many descriptors; each file's mode and
// times are set after its data (a write would change its mtime), as its owner.
class DataWriter {
 public:
  DataWriter(const ChunkSource& source, uint32_t uid_base) : source_(source), uid_base_(uid_base) {}

  // The file `e`, created and sized, open for writing as `fd`.
  Status Add(const v1::SnapshotEntry& e, UniqueFd fd) {
    for (const auto& x : e.extents()) batch_bytes_ += x.length();
    files_.push_back({&e, std::move(fd)});
    if (files_.size() >= kMaxOpenFiles || batch_bytes_ >= kBatchBytes) return Flush();
    return Status::Ok();
  }

  Status Flush() {
    struct Job {
      const v1::SnapshotEntry* entry;
      const v1::SnapshotExtent* extent;
      int fd;
    };
    std::vector<Job> jobs;
    for (const auto& f : files_) {
      for (const auto& x : f.entry->extents()) jobs.push_back({f.entry, &x, f.fd.get()});
    }
    std::atomic<size_t> next{0};
    std::mutex mu;
    Status first = Status::Ok();
    auto work = [&] {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        const Job& j = jobs[i];
        Status s = source_.CopyTo(j.extent->sha256(), j.extent->length(), j.fd, j.extent->offset());
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first.ok()) first = s.WithContext(j.entry->path());
          next = jobs.size();
        }
      }
    };
    const size_t threads = std::min<size_t>(jobs.size(), Threads());
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
    for (auto& t : helpers) t.join();
    SINEW_RETURN_IF_ERROR(first);
    for (const auto& f : files_) {
      const v1::SnapshotEntry& e = *f.entry;
      AsOwner as_owner(ToHostId(e.uid(), uid_base_), ToHostId(e.gid(), uid_base_));
      const timespec times[2] = {FromNs(e.mtime_ns()), FromNs(e.mtime_ns())};
      if (fchmod(f.fd.get(), e.mode() & 01777) != 0 || futimens(f.fd.get(), times) != 0) {
        return Errno("set mode of " + e.path());
      }
    }
    files_.clear();
    batch_bytes_ = 0;
    return Status::Ok();
  }

 private:
  static constexpr size_t kMaxOpenFiles = 256;
  static constexpr uint64_t kBatchBytes = 256ull << 20;
  static size_t Threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4); }

  struct File {
    const v1::SnapshotEntry* entry;
    UniqueFd fd;
  };
  const ChunkSource& source_;
  const uint32_t uid_base_;
  std::vector<File> files_;
  uint64_t batch_bytes_ = 0;
};

}  // namespace

Status WriteAll(int fd, std::string_view data, uint64_t offset) {
  while (!data.empty()) {
    ssize_t n = pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status ChunkSource::CopyTo(const std::string& sha256, uint64_t length, int fd, uint64_t offset) const {
  SINEW_ASSIGN_OR_RETURN(std::string data, Get(sha256));
  if (data.size() != length) return Status::Corruption("a chunk has the wrong size");
  return WriteAll(fd, data, offset);
}

Result<UniqueFd> OpenBeneath(int root_fd, const std::string& rel) {
  std::vector<std::string> parts = Components(rel);
  for (const auto& c : parts) {
    if (c.empty() || c == "." || c == "..") return Status::InvalidArgument("bad directory name '" + rel + "'");
  }
  parts.emplace_back("x");  // OpenParent opens all but the last component
  SINEW_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(root_fd, parts));
  return dir;
}

std::string Sha256(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md), len);
}

Result<v1::SnapshotTree> CaptureTree(int root_fd, const std::string& root_name, ChunkSink& sink,
                                     uint32_t uid_base, const CaptureLimits& limits,
                                     CaptureStats& stats, const CaptureCache* previous,
                                     CaptureCache* next) {
  v1::SnapshotTree tree;
  tree.set_root(root_name);
  if (next != nullptr) next->clear();
  Walker walker(sink, uid_base, limits, stats, tree, previous, next);
  SINEW_RETURN_IF_ERROR(walker.Run(root_fd).WithContext("snapshot of " + root_name));
  return tree;
}

Status ValidateTree(const v1::SnapshotTree& tree) {
  std::set<std::string> dirs = {""};
  std::set<std::string> files;
  std::set<std::string> names;
  for (const auto& e : tree.entries()) {
    const std::string& p = e.path();
    auto bad = [&](const std::string& why) {
      return Status::Corruption("snapshot entry '" + p.substr(0, 200) + "' of " + tree.root() + ": " + why);
    };
    if (p.empty() || p.size() > 4096 || p.find('\0') != std::string::npos) return bad("bad path");
    std::vector<std::string> parts = Components(p);
    for (const auto& c : parts) {
      if (c.empty() || c == "." || c == ".." || c.size() > 255) return bad("bad path component");
    }
    std::string parent = p.substr(0, p.size() - parts.back().size());
    if (!parent.empty()) parent.pop_back();
    if (!dirs.count(parent)) return bad("its parent is not a directory of the snapshot");
    if (!names.insert(p).second) return bad("listed twice");
    switch (e.kind()) {
      case v1::SnapshotEntry::DIR:
        dirs.insert(p);
        break;
      case v1::SnapshotEntry::FILE: {
        uint64_t end = 0;
        for (const auto& x : e.extents()) {
          if (x.sha256().size() != 32 || x.length() == 0 || x.length() > kChunkBytes ||
              x.offset() < end || x.offset() + x.length() > e.size() || x.offset() + x.length() < x.offset()) {
            return bad("bad extent");
          }
          end = x.offset() + x.length();
        }
        files.insert(p);
        break;
      }
      case v1::SnapshotEntry::SYMLINK:
        if (e.target().empty() || e.target().size() >= PATH_MAX ||
            e.target().find('\0') != std::string::npos) {
          return bad("bad symlink target");
        }
        break;
      case v1::SnapshotEntry::HARDLINK:
        if (!files.count(e.target())) return bad("hard link to something not an earlier file of the snapshot");
        break;
      case v1::SnapshotEntry::FIFO:
        break;
      default:
        return bad("unknown kind");
    }
  }
  return Status::Ok();
}

Status RestoreTree(const v1::SnapshotTree& tree, int root_fd, const ChunkSource& source,
                   uint32_t uid_base) {
  SINEW_RETURN_IF_ERROR(ValidateTree(tree));
  std::vector<const v1::SnapshotEntry*> dirs;
  DataWriter data(source, uid_base);
  for (const auto& e : tree.entries()) {
    std::vector<std::string> parts = Components(e.path());
    const std::string& name = parts.back();
    const char* n = name.c_str();
    SINEW_ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(root_fd, parts));
    const int pfd = parent.get();
    std::optional<AsOwner> as_owner(std::in_place, ToHostId(e.uid(), uid_base), ToHostId(e.gid(), uid_base));
    const mode_t mode = e.mode() & 01777;
    const timespec times[2] = {FromNs(e.mtime_ns()), FromNs(e.mtime_ns())};
    bool kept_dir = false;
    SINEW_RETURN_IF_ERROR(ClearPlanted(pfd, n, e.path(), e.kind() == v1::SnapshotEntry::DIR, &kept_dir));
    // Whatever is planted between the check and the creation makes the creation fail
    // (O_EXCL, mkdirat, symlinkat, linkat, mkfifoat): nothing is followed.
    switch (e.kind()) {
      case v1::SnapshotEntry::DIR:
        if (!kept_dir && mkdirat(pfd, n, 0700) != 0) return Errno("mkdir " + e.path());
        dirs.push_back(&e);  // owner, mode and time once its children exist
        break;
      case v1::SnapshotEntry::FILE: {
        UniqueFd fd(openat(pfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (fd.get() < 0) return Errno("create " + e.path());
        if (ftruncate(fd.get(), static_cast<off_t>(e.size())) != 0) return Errno("size " + e.path());
        // Its data, mode and times come with its batch: the store is read with the daemon's
        // own ids, and the file is written through this descriptor.
        as_owner.reset();
        SINEW_RETURN_IF_ERROR(data.Add(e, std::move(fd)));
        break;
      }
      case v1::SnapshotEntry::SYMLINK:
        if (symlinkat(e.target().c_str(), pfd, n) != 0) return Errno("symlink " + e.path());
        if (utimensat(pfd, n, times, AT_SYMLINK_NOFOLLOW) != 0) return Errno("set time of " + e.path());
        break;
      case v1::SnapshotEntry::HARDLINK: {
        std::vector<std::string> tparts = Components(e.target());
        SINEW_ASSIGN_OR_RETURN(UniqueFd tparent, OpenParent(root_fd, tparts));
        // Flags 0: a symlink at the target would be linked as itself, never followed;
        // validation made the target an earlier regular file of this tree.
        if (linkat(tparent.get(), tparts.back().c_str(), pfd, n, 0) != 0) return Errno("link " + e.path());
        break;
      }
      case v1::SnapshotEntry::FIFO: {
        if (mkfifoat(pfd, n, 0600) != 0) return Errno("mkfifo " + e.path());
        UniqueFd fd(openat(pfd, n, O_PATH | O_NOFOLLOW | O_CLOEXEC));
        struct stat st{};
        if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISFIFO(st.st_mode)) return Errno("open " + e.path());
        const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
        if (chmod(proc.c_str(), mode) != 0 || utimensat(pfd, n, times, AT_SYMLINK_NOFOLLOW) != 0) {
          return Errno("set mode of " + e.path());
        }
        break;
      }
      default:
        return Status::Corruption("unknown entry kind");
    }
  }
  SINEW_RETURN_IF_ERROR(data.Flush());
  // Directories last, deepest first: their times are not changed again by their children.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const v1::SnapshotEntry& e = **it;
    AsOwner as_owner(ToHostId(e.uid(), uid_base), ToHostId(e.gid(), uid_base));
    std::vector<std::string> parts = Components(e.path());
    SINEW_ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(root_fd, parts));
    UniqueFd dir(openat(parent.get(), parts.back().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const timespec times[2] = {FromNs(e.mtime_ns()), FromNs(e.mtime_ns())};
    if (dir.get() < 0 || fchmod(dir.get(), e.mode() & 01777) != 0 || futimens(dir.get(), times) != 0) {
      return Errno("set mode of " + e.path());
    }
  }
  return Status::Ok();
}

}  // namespace sinew::sandbox
