// Host-side helpers of the provisioner: the agent's files for bind-mounting into
// containers, cgroup inspection and removal, and leftover reaping.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <chrono>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::sandbox {

// Copies `agent_binary` into `dest_dir`, which containers bind-mount read-only. The
// agent is normally linked statically (true is returned). A dynamically linked agent
// (false) gets every shared library `ldd` lists copied into lib/ and the dynamic loader
// as ld.so, so that it runs in any image whatever its libc: the container then starts
// it as `ld.so --library-path lib sinew-sandbox-agent`.
[[nodiscard]] Result<bool> PrepareAgentDir(const std::string& agent_binary,
                                           const std::string& dest_dir);

// The cgroup directories of sandbox `name` below `parent`: one per v1 hierarchy, or the
// one v2 directory.
std::vector<std::string> CgroupDirs(const std::string& parent, const std::string& name);
// Number of processes the kernel OOM-killed in that cgroup (memory.oom_control's
// oom_kill on v1, memory.events' oom_kill on v2); 0 if unknown.
uint64_t OomKills(const std::string& parent, const std::string& name);
// What a sandbox's cgroup has used: peak memory and CPU time; 0 for what cannot be read.
struct CgroupUsage {
  uint64_t memory_peak_bytes = 0;
  uint64_t cpu_usage_ns = 0;
};
CgroupUsage ReadCgroupUsage(const std::string& parent, const std::string& name);
// True when cgroup v1's memory.memsw.* files exist (swap can be capped).
bool HasMemorySwapAccounting();
// Names of the sandbox cgroups below `parent` in any hierarchy.
std::vector<std::string> ListCgroups(const std::string& parent);
// Removes the cgroup directories of `name` (they must hold no process).
[[nodiscard]] Status RemoveCgroups(const std::string& parent, const std::string& name);
// SIGKILLs every process whose /proc/<pid>/cmdline (NUL-separated) contains `needle`.
void KillProcessesMentioning(const std::string& needle);
// The processes in the cgroups of `name` (each once; the pids cgroup's list under v1).
std::vector<pid_t> CgroupProcesses(const std::string& parent, const std::string& name);
// Freezes (or thaws) every process in the cgroup of `name` through the kernel's freezer
// (v1 freezer.state, v2 cgroup.freeze) and waits until the kernel says it is done; a
// freeze that does not finish within `wait` is undone and fails.
[[nodiscard]] Status FreezeCgroup(const std::string& parent, const std::string& name, bool frozen,
                                  std::chrono::milliseconds wait = std::chrono::seconds(10));
// SIGKILLs every process in the cgroups of `name` and waits (up to 2 s) until they are gone.
void KillCgroupProcesses(const std::string& parent, const std::string& name);
// This process's children that have exited and are not reaped yet, whose command name
// (/proc/<pid>/comm) is `comm`.
std::vector<pid_t> ZombieChildren(const std::string& comm);
// The kernel's task limits (kernel.pid_max, kernel.threads-max); 0 for what cannot be read.
struct HostTaskLimits {
  uint64_t pid_max = 0;
  uint64_t threads_max = 0;
};
HostTaskLimits ReadHostTaskLimits();
// The default host task budget of all sandboxes together: half of the smaller of the two
// limits (those that could be read; 0 when neither could).
uint64_t DefaultHostPidsBudget(const HostTaskLimits& limits);
// Creates the parent cgroup in the pids hierarchy (v1) or the unified one (v2, with the
// pids controller enabled for it) and sets its pids.max to `max`, so that the tasks of
// all sandboxes below it together never exceed `max`.
[[nodiscard]] Status SetParentPidsMax(const std::string& parent, uint64_t max);
// True when a fork or thread of sandbox `name` was refused although its own pids.max was
// never reached, i.e. by an ancestor's limit (the parent's budget). Reads the sandbox's
// pids.events and pids.peak, so it must be called before its cgroups are removed; false
// where the kernel does not report it (cgroup v2 counts events where the limit is).
bool RefusedByParentPidsLimit(const std::string& parent, const std::string& name);
// Removes the (empty) parent cgroup directories; leaves them if they are in use.
void RemoveCgroupParent(const std::string& parent);
// True when process `pid` no longer runs (absent, or a zombie waiting to be reaped).
bool ProcessGone(pid_t pid);
// Mount points (from /proc/self/mountinfo) at or below `dir`.
std::vector<std::string> MountsBelow(const std::string& dir);

}  // namespace sinew::sandbox
