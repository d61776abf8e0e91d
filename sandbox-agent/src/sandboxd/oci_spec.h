// The OCI runtime configuration (config.json for runc) of one sandbox, built with
// Boost.JSON: read-only image root, size-capped tmpfs /workspace, new pid, mount,
// network, ipc, uts and cgroup namespaces, cgroup limits, no capabilities,
// no_new_privileges, a seccomp deny list and a non-root user.
#pragma once

#include <string>
#include <vector>

#include "sinew/proto/sandbox.pb.h"

namespace sinew::sandbox {

inline constexpr int kSandboxUid = 1000;
inline constexpr int kSandboxGid = 1000;
// Paths inside the container (the image must have them as directories).
inline constexpr const char* kAgentMountPoint = "/.sinew/agent";
inline constexpr const char* kRunMountPoint = "/.sinew/run";
inline constexpr const char* kWorkspace = "/workspace";

struct OciParams {
  std::string rootfs;          // absolute path of the image's rootfs
  std::string agent_dir;       // host directory with the agent and its libraries
  std::string run_dir;         // host directory for the agent's socket
  std::string cgroups_path;    // e.g. /sinew/sb-123
  v1::Resources resources;     // with defaults filled in
  bool memory_swap_accounting = false;  // cgroup v1 memsw files exist: also cap swap
  uint32_t max_output_bytes = 30000;
  bool agent_static = true;    // false: start the agent through the copied ld.so
};

// The config.json text.
std::string BuildOciConfig(const OciParams& params);
// The config.json of a bare container running `args` (for benchmarks): same image, no
// limits beyond runc's defaults.
std::string BuildBareOciConfig(const std::string& rootfs, const std::vector<std::string>& args);

}  // namespace sinew::sandbox
