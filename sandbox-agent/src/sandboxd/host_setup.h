// Host-side helpers of the provisioner: the agent's files for bind-mounting into
// containers, cgroup inspection and removal, and leftover reaping.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::sandbox {

// Copies `agent_binary`, every shared library `ldd` lists for it, and the dynamic loader
// (as ld.so) into `dest_dir` (binary at the top, libraries in lib/), so that the agent
// runs in any image, whatever its libc: the container starts it as
// `ld.so --library-path lib sinew-sandbox-agent`.
[[nodiscard]] Status PrepareAgentDir(const std::string& agent_binary, const std::string& dest_dir);

// The cgroup directories of sandbox `name` below `parent`: one per v1 hierarchy, or the
// one v2 directory.
std::vector<std::string> CgroupDirs(const std::string& parent, const std::string& name);
// Number of processes the kernel OOM-killed in that cgroup (memory.oom_control's
// oom_kill on v1, memory.events' oom_kill on v2); 0 if unknown.
uint64_t OomKills(const std::string& parent, const std::string& name);
// True when cgroup v1's memory.memsw.* files exist (swap can be capped).
bool HasMemorySwapAccounting();
// Names of the sandbox cgroups below `parent` in any hierarchy.
std::vector<std::string> ListCgroups(const std::string& parent);
// Removes the cgroup directories of `name` (they must hold no process).
[[nodiscard]] Status RemoveCgroups(const std::string& parent, const std::string& name);
// Mount points (from /proc/self/mountinfo) at or below `dir`.
std::vector<std::string> MountsBelow(const std::string& dir);

}  // namespace sinew::sandbox
