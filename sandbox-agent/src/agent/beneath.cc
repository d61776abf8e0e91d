#include "agent/beneath.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/file_util.h"

namespace sinew::sandbox {
namespace {

// A concurrent rename anywhere on the system makes RESOLVE_BENEATH answer EAGAIN; retry.
constexpr int kMaxRetries = 256;

std::atomic<int> g_openat2_state{-1};  // -1 unknown, 0 absent or disabled, 1 present

std::vector<std::string> Components(const std::string& relative) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string::npos) slash = relative.size();
    std::string c = relative.substr(start, slash - start);
    if (!c.empty() && c != ".") out.push_back(std::move(c));
    start = slash + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

Status ErrnoStatus(int err, const std::string& shown, const char* what) {
  switch (err) {
    case EXDEV:
    case ELOOP:
      return Status::PermissionDenied("path '" + shown +
                                      "' leads outside the workspace (through a symbolic link or "
                                      "'..'); this tool only works below it");
    case ENOENT:
      return Status::NotFound("file not found: " + shown);
    case ENOTDIR:
      return Status::InvalidArgument("a component of " + shown + " is not a directory");
    case EISDIR:
      return Status::InvalidArgument(shown + " is a directory");
    case ENOSPC:
      return Status::IOError(std::string("cannot ") + what + " " + shown + ": " +
                             std::strerror(err) + " (the workspace is full; delete files to make room)");
    case EACCES:
    case EPERM:
      return Status::PermissionDenied(std::string("cannot ") + what + " " + shown + ": " +
                                      std::strerror(err));
    default:
      return Status::IOError(std::string("cannot ") + what + " " + shown + ": " + std::strerror(err));
  }
}

// openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS; returns -errno on failure.
int Openat2Beneath(int root_fd, const std::string& relative, int flags, int mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? static_cast<uint64_t>(mode) : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, root_fd, relative.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if ((errno == EAGAIN || errno == EINTR) && attempt < kMaxRetries) continue;
    return -errno;
  }
}

// The fallback: one component at a time, never following a symbolic link.
int WalkNoFollow(int root_fd, const std::string& relative, int flags, int mode) {
  std::vector<std::string> parts = Components(relative);
  int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) return -errno;
  if (parts.empty()) {
    int fd = openat(dir, ".", flags | O_CLOEXEC, mode);
    int err = errno;
    close(dir);
    return fd >= 0 ? fd : -err;
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] == "..") {
      close(dir);
      return -EXDEV;
    }
    int next = openat(dir, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(dir);
    if (next < 0) return -(err == ENOTDIR ? ELOOP : err);
    dir = next;
  }
  if (parts.back() == "..") {
    close(dir);
    return -EXDEV;
  }
  int fd = openat(dir, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  int err = errno;
  close(dir);
  return fd >= 0 ? fd : -err;
}

int OpenRaw(int root_fd, const std::string& relative, int flags, int mode) {
  const std::string rel = relative.empty() ? "." : relative;
  if (HaveOpenat2()) {
    int fd = Openat2Beneath(root_fd, rel, flags, mode);
    if (fd != -ENOSYS) return fd;
    g_openat2_state = 0;
  }
  return WalkNoFollow(root_fd, rel, flags, mode);
}

}  // namespace

bool HaveOpenat2() {
  int state = g_openat2_state.load();
  if (state < 0) {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
    state = fd >= 0 ? 1 : (errno == ENOSYS ? 0 : 1);
    if (fd >= 0) close(static_cast<int>(fd));
    g_openat2_state = state;
  }
  return state == 1;
}

void SetOpenat2ForTesting(bool enabled) { g_openat2_state = enabled ? -1 : 0; }

Result<UniqueFd> OpenBeneath(int root_fd, const std::string& relative, int flags, int mode,
                             const std::string& shown) {
  int fd = OpenRaw(root_fd, relative, flags, mode);
  if (fd < 0) return ErrnoStatus(-fd, shown, "open");
  return UniqueFd(fd);
}

Result<UniqueFd> OpenParentBeneath(int root_fd, const std::string& relative,
                                   const std::string& shown) {
  std::vector<std::string> parts = Components(relative);
  if (parts.empty()) return Status::InvalidArgument(shown + " names the workspace itself, not a file");
  const size_t depth = parts.size() - 1;
  int fd = OpenRaw(root_fd, Join(parts, depth), O_DIRECTORY | O_RDONLY, 0);
  if (fd >= 0) return UniqueFd(fd);
  if (fd != -ENOENT) return ErrnoStatus(-fd, shown, "open the directory of");
  // Create the missing directories one by one; each is re-opened beneath the root, so a
  // directory swapped for a link meanwhile is caught.
  UniqueFd dir(OpenRaw(root_fd, ".", O_DIRECTORY | O_RDONLY, 0));
  if (dir.get() < 0) return ErrnoStatus(-dir.get(), shown, "open the workspace for");
  for (size_t i = 0; i < depth; ++i) {
    if (parts[i] == "..") return ErrnoStatus(EXDEV, shown, "create");
    if (mkdirat(dir.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, Join(parts, i + 1), "create the directory");
    }
    int next = OpenRaw(root_fd, Join(parts, i + 1), O_DIRECTORY | O_RDONLY, 0);
    if (next < 0) return ErrnoStatus(-next, shown, "open the directory of");
    dir = UniqueFd(next);
  }
  return dir;
}

Result<PendingFile> PendingFile::Create(int root_fd, const std::string& relative,
                                        const std::string& shown) {
  std::vector<std::string> parts = Components(relative);
  if (parts.empty() || parts.back() == "..")
    return Status::InvalidArgument(shown + " does not name a file");
  PendingFile out;
  SINEW_ASSIGN_OR_RETURN(out.dir_, OpenParentBeneath(root_fd, relative, shown));
  out.name_ = parts.back();
  out.shown_ = shown;
  struct stat old_st{};
  if (fstatat(out.dir_.get(), out.name_.c_str(), &old_st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(old_st.st_mode)) return Status::InvalidArgument(shown + " is a directory");
    if (S_ISREG(old_st.st_mode)) out.keep_mode_ = old_st.st_mode & 07777;
  }
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) nonce = static_cast<uint64_t>(getpid());
  char suffix[32];
  snprintf(suffix, sizeof(suffix), ".sinew-tmp-%016llx", static_cast<unsigned long long>(nonce));
  std::string tmp = "." + out.name_.substr(0, 200) + suffix;
  int fd = openat(out.dir_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, shown, "write");
  out.file_ = UniqueFd(fd);
  out.tmp_ = std::move(tmp);
  return out;
}

PendingFile::~PendingFile() {
  if (!tmp_.empty() && dir_.get() >= 0) unlinkat(dir_.get(), tmp_.c_str(), 0);
}

namespace {

Status Full(int err, const std::string& shown) {
  return Status::ResourceExhausted("cannot write " + shown + ": " + std::strerror(err) +
                                   " (the workspace is full; delete files to make room)");
}

}  // namespace

Status PendingFile::Reserve(uint64_t bytes) {
  if (tmp_.empty()) return Status::FailedPrecondition(shown_ + " is no longer being written");
  if (bytes == 0) return Status::Ok();
  if (fallocate(file_.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0) return Status::Ok();
  const int err = errno;
  if (err == EOPNOTSUPP || err == ENOSYS || err == EINTR || err == EPERM) return Status::Ok();  // Append finds out
  unlinkat(dir_.get(), tmp_.c_str(), 0);
  tmp_.clear();
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return Full(err, shown_);
  return ErrnoStatus(err, shown_, "write");
}

Status PendingFile::Append(std::string_view data) {
  if (tmp_.empty()) return Status::FailedPrecondition(shown_ + " is no longer being written");
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(file_.get(), data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      unlinkat(dir_.get(), tmp_.c_str(), 0);
      tmp_.clear();
      if (err == ENOSPC || err == EDQUOT || err == EFBIG) return Full(err, shown_);
      return ErrnoStatus(err, shown_, "write");
    }
    off += static_cast<size_t>(n);
  }
  size_ += data.size();
  return Status::Ok();
}

Status PendingFile::Commit() {
  if (tmp_.empty()) return Status::FailedPrecondition(shown_ + " is no longer being written");
  if (keep_mode_ != 0) fchmod(file_.get(), keep_mode_);
  file_ = UniqueFd();
  if (renameat(dir_.get(), tmp_.c_str(), dir_.get(), name_.c_str()) != 0) {
    const int err = errno;
    unlinkat(dir_.get(), tmp_.c_str(), 0);
    tmp_.clear();
    return ErrnoStatus(err, shown_, "replace");
  }
  tmp_.clear();
  return Status::Ok();
}

Status WriteBeneath(int root_fd, const std::string& relative, const std::string& content,
                    const std::string& shown) {
  SINEW_ASSIGN_OR_RETURN(PendingFile file, PendingFile::Create(root_fd, relative, shown));
  SINEW_RETURN_IF_ERROR(file.Append(content));
  return file.Commit();
}

Result<std::string> ReadBeneath(int root_fd, const std::string& relative, const std::string& shown) {
  SINEW_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root_fd, relative, O_RDONLY | O_NONBLOCK, 0, shown));
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, shown, "read");
  if (S_ISDIR(st.st_mode))
    return Status::InvalidArgument(shown + " is a directory; use list_files to see its content");
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(shown + " is not a regular file");
  if (static_cast<uintmax_t>(st.st_size) > kMaxFileBytes) {
    return Status::ResourceExhausted(shown + " is " + std::to_string(st.st_size) +
                                     " bytes, more than the " + std::to_string(kMaxFileBytes) +
                                     " this tool loads; use bash (head, tail, sed -n) instead");
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, shown, "read");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxFileBytes) return Status::ResourceExhausted(shown + " grew past the size limit while being read");
  }
  return out;
}

}  // namespace sinew::sandbox
