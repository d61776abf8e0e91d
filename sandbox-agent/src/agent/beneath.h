// Race-free access to files below a directory (the workspace): every path is resolved
// by the kernel relative to a descriptor of that directory with openat2(2) and
// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, so no symbolic link, `..`, or concurrent
// rename (renameat2 RENAME_EXCHANGE of a directory and a link) can make a write land
// outside it. Kernels without openat2 (before 5.6) get a component-by-component walk
// with O_NOFOLLOW that refuses every symbolic link.
//
// Thread-safety: free functions; the descriptor type is not shared.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sinew/status.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

// Opens `relative` (no leading '/', no '..' component once normalised) below the
// directory `root_fd` with open(2) `flags` (O_CLOEXEC is added) and `mode`.
// Errors: kPermissionDenied when resolution would leave the root (EXDEV, ELOOP), kNotFound,
// kIOError otherwise; messages name `shown` (the path as the caller should see it).
[[nodiscard]] Result<UniqueFd> OpenBeneath(int root_fd, const std::string& relative, int flags,
                                           int mode, const std::string& shown);

// Opens the parent directory of `relative` below `root_fd` (O_DIRECTORY), creating the
// missing directories one by one, each created and then re-opened beneath the root.
[[nodiscard]] Result<UniqueFd> OpenParentBeneath(int root_fd, const std::string& relative,
                                                 const std::string& shown);

// A file being written to `relative` below a root: its bytes go to a temporary file in the
// pinned parent directory (created O_EXCL | O_NOFOLLOW), which Commit renames over the
// name (a symbolic link there is replaced, never followed; a replaced regular file's mode
// is kept). Destroyed without a successful Commit, it removes the temporary file, so a
// failed or abandoned write leaves nothing.
class PendingFile {
 public:
  // Creates the parent directories and the temporary file. Errors as OpenBeneath's;
  // kInvalidArgument when the name is a directory or names no file.
  [[nodiscard]] static Result<PendingFile> Create(int root_fd, const std::string& relative,
                                                  const std::string& shown);
  PendingFile(PendingFile&&) noexcept = default;
  PendingFile& operator=(PendingFile&&) = delete;
  ~PendingFile();

  // Allocates `bytes` for the file up front (its size stays what Append wrote), so a file
  // that cannot fit is refused at once. kResourceExhausted when the file system is full.
  [[nodiscard]] Status Reserve(uint64_t bytes);
  // Appends `data`. kResourceExhausted when the file system is full.
  [[nodiscard]] Status Append(std::string_view data);
  // Puts the file in place under its name.
  [[nodiscard]] Status Commit();
  uint64_t size() const { return size_; }

 private:
  PendingFile() = default;

  UniqueFd dir_;
  UniqueFd file_;
  std::string name_;
  std::string tmp_;  // "" once committed or removed
  std::string shown_;
  mode_t keep_mode_ = 0;  // the replaced regular file's mode; 0: none
  uint64_t size_ = 0;
};

// Writes `content` to `relative` below `root_fd`, creating parent directories, replacing
// the file atomically (temporary file + renameat in the same pinned directory). A symbolic
// link at the final name is replaced, never followed. Keeps the mode of a replaced file.
[[nodiscard]] Status WriteBeneath(int root_fd, const std::string& relative,
                                  const std::string& content, const std::string& shown);

// Reads the whole regular file `relative` below `root_fd` (at most kMaxFileBytes).
[[nodiscard]] Result<std::string> ReadBeneath(int root_fd, const std::string& relative,
                                              const std::string& shown);

// True when this kernel has openat2 (false: the O_NOFOLLOW walk is used). Tests force
// the fallback with SetOpenat2ForTesting(false).
bool HaveOpenat2();
void SetOpenat2ForTesting(bool enabled);

}  // namespace sinew::sandbox
