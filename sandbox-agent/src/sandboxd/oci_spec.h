// The OCI runtime configuration (config.json for runc) of one sandbox, built with
// Boost.JSON: read-only image root, size-capped tmpfs /workspace, new pid, mount,
// network, ipc, uts and cgroup namespaces, cgroup limits, no_new_privileges, a seccomp
// deny list (both runtimes), and an agent that starts as root with the three capabilities
// it needs to drop to its own uid, which it does before serving.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sinew/proto/sandbox.pb.h"

namespace sinew::sandbox {

inline constexpr int kSandboxUid = 1000;
inline constexpr int kSandboxGid = 1000;
// The agent's real and saved uid (its effective uid is kSandboxUid): no account has it,
// so no process of the sandbox user may signal or trace the agent.
inline constexpr int kAgentUid = 999;
// Paths inside the container (the image must have them as directories).
inline constexpr const char* kAgentMountPoint = "/.sinew/agent";
inline constexpr const char* kRunMountPoint = "/.sinew/run";  // images keep it; nothing is mounted there now
// Descriptors the agent inherits (runc --preserve-fds 2): its bound, not yet listening
// socket, and a pipe holding its secret.
inline constexpr int kAgentListenFd = 3;
inline constexpr int kAgentSecretFd = 4;
inline constexpr const char* kWorkspace = "/workspace";

struct OciParams {
  std::string rootfs;                   // absolute path of the image's rootfs
  std::string agent_dir;                // host directory with the agent and its libraries
  std::string sandbox_id;               // passed to the agent (bound into its proofs)
  uint32_t uid_base = 0;                // first host uid of its user namespace; 0: none
  std::string userns_path;              // join this user namespace (UsernsHolder); empty: runc makes it
  std::string cgroups_path;             // e.g. /sinew/sb-123
  v1::Resources resources;              // with defaults filled in
  bool memory_swap_accounting = false;  // cgroup v1 memsw files exist: also cap swap
  uint32_t max_output_bytes = 30000;
  bool agent_static = true;  // false: start the agent through the copied ld.so
  // gVisor (runsc): it cannot pass descriptors, so the agent creates its socket in
  // `run_dir` (mounted at /.sinew/run, writable by root alone) before it drops its
  // privileges, and reads its secret from the environment.
  bool gvisor = false;
  std::string run_dir;       // host directory for the socket (gvisor only)
  std::string agent_secret;  // gvisor only
};

// The host pids cgroup ceiling for a sandbox allowed `pids_limit` processes: the limit
// itself under runc; under gVisor's ptrace platform the most host tasks that many guest
// processes can take (the sentry's threads and their stub processes; the guest's
// processes are held to pids_limit by RLIMIT_NPROC in gVisor's kernel), so that a guest
// at its limit has its forks refused instead of the sentry its threads.
int64_t HostPidsLimit(uint32_t pids_limit, bool gvisor);
// The config.json text.
std::string BuildOciConfig(const OciParams& params);
// The config.json of a bare container running `args` (for benchmarks): same image, no
// limits beyond runc's defaults.
std::string BuildBareOciConfig(const std::string& rootfs, const std::vector<std::string>& args);

}  // namespace sinew::sandbox
