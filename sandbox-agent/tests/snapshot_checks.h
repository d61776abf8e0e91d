// Helpers of the snapshot, fork and pause tests: a sandbox owned by someone, a tree of
// what a hostile sandbox can write, and a file-by-file manifest of its writable trees.
// Test helper, not a double.
//
// Thread-safety: not thread-safe; one per test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sandboxd_process.h"

namespace sinew::sandbox::testing {

// A ready sandbox of SmallResources owned by `owner` (fails the test otherwise).
v1::SandboxInfo ProvisionOwned(SandboxdProcess& d, const std::string& owner);
// A tool client of `info` (fails the test otherwise).
std::unique_ptr<SandboxClient> Connect(const v1::SandboxInfo& info);
// Writes, as the sandbox user: nested directories, files with modes and old times, a
// 2.5 MB random file, a symlink to /etc/shadow and one climbing out with "..", a hard
// link, a fifo, a 1 GiB sparse file, and files in /tmp and /dev/shm.
void WriteHostileTree(SandboxClient& tools);
// Every entry of /workspace, /tmp and /dev/shm: kind, mode, owner, links, size, mtime,
// symlink target, and the SHA-256 of each regular file (the sparse one: its tail and
// whether it is still sparse).
std::string Manifest(SandboxClient& tools);
// Whether the daemon runs runsc sandboxes (its Health names runsc).
bool RunscUsable(SandboxdProcess& d);
// A ready runsc sandbox of SmallResources owned by `owner` (fails the test otherwise).
v1::SandboxInfo ProvisionRunsc(SandboxdProcess& d, const std::string& owner);
// Starts, in the background, a process that holds a random number and a counter (counting
// up every 10 ms) in memory only; returns once it answers HolderState.
void StartMemoryHolder(SandboxClient& tools);
// The holder's own state, "pid secret count", which it writes when asked (SIGUSR1).
std::string HolderState(SandboxClient& tools);
// Regular files below `dir` (0 when it is missing).
uint64_t CountFiles(const std::string& dir);

}  // namespace sinew::sandbox::testing
