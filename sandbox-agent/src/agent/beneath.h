// Race-free access to files below a directory (the workspace): every path is resolved
// by the kernel relative to a descriptor of that directory with openat2(2) and
// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, so no symbolic link, `..`, or concurrent
// rename (renameat2 RENAME_EXCHANGE of a directory and a link) can make a write land
// outside it. Kernels without openat2 (before 5.6) get a component-by-component walk
// with O_NOFOLLOW that refuses every symbolic link.
//
// Thread-safety: free functions; the descriptor type is not shared.
#pragma once

#include <string>

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
