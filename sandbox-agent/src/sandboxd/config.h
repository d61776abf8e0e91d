// ProvisionerConfig: everything sinew-sandboxd is told by its flags.
// A plain value; copied into the components that need it.
#pragma once

#include <cstdint>
#include <string>

#include "sinew/proto/sandbox.pb.h"

namespace sinew::sandbox {

// Host uids (and gids) per sandbox when user namespaces are on.
inline constexpr uint32_t kUidRangeSize = 65536;

struct ProvisionerConfig {
  // Runtime state: runc's root, one directory per sandbox (bundle, socket, log) and the
  // agent's files. Everything below it belongs to this daemon and is reaped on start.
  // Default: /run/sinew
  std::string state_dir = "/run/sinew";
  // Images: <image_root>/<name>/rootfs, ready when <image_root>/<name>/READY exists.
  // Default: /var/lib/sinew/images
  std::string image_root = "/var/lib/sinew/images";
  // The agent binary that runs as each sandbox's init. Default: next to sinew-sandboxd
  std::string agent_binary;
  // The runc binary. Default: runc (from PATH)
  std::string runc = "runc";
  // gVisor's runsc binary, for sandboxes whose resources.runtime is "runsc"; when it is
  // missing or unusable such sandboxes are refused with FAILED_PRECONDITION.
  // Default: runsc (from PATH)
  std::string runsc = "runsc";
  // Parent cgroup of all sandboxes (a name below each hierarchy's root). Default: sinew
  std::string cgroup_parent = "sinew";
  // Host tasks (processes and threads) all sandboxes together may hold: the parent
  // cgroup's pids.max, set at start. A runsc sandbox's own ceiling is far above its
  // process limit (HostPidsLimit), so without this one fork-bombing sandbox could take
  // every PID of the host. 0: half of min(kernel.pid_max, kernel.threads-max). Default: 0
  uint64_t host_pids_budget = 0;
  // Ready sandboxes kept per resource shape (the default shape and each shape asked
  // for, up to max_warm_shapes). Default: 2
  uint32_t warm_pool_size = 2;
  uint32_t max_warm_shapes = 4;
  // Sandboxes at once, warm ones included. Default: 64
  uint32_t max_sandboxes = 64;
  // Containers starting at once (`runc run` and the agent's start); further starts
  // wait their turn (owners take turns, start_line.h), so that a burst of provisions
  // does not push every start past its time limit. 0: eight per CPU. Default: 0
  uint32_t max_concurrent_starts = 0;
  // Output cap of each tool call inside the sandboxes. Default: 30000
  uint32_t max_output_bytes = 30000;
  // User namespaces: each sandbox gets its own range of kUidRangeSize host uids and gids,
  // slot k covering [userns_uid_base + k * kUidRangeSize, ... + kUidRangeSize), with
  // k < max_sandboxes; its uid 0 maps to the first of them (no host account), its user
  // (uid 1000) to the first + 1000. A range is reused only after its sandbox is gone.
  // Start-up refuses a range that overlaps /etc/passwd, /etc/group, /etc/subuid or
  // /etc/subgid. 0 turns user namespaces off (every sandbox is host uid 1000).
  // Default: 1000000000
  uint32_t userns_uid_base = 1000000000;
  // Snapshots (content-addressed chunks and their records; docs/sandbox.md). They survive
  // a restart of the daemon. Default: <state_dir>/snapshots
  std::string snapshot_dir;
  // Bytes of snapshot data each owner may hold (each chunk counted once); a snapshot
  // above it is refused (RESOURCE_EXHAUSTED). 0: no cap. Default: 16 GiB
  uint64_t snapshot_bytes_per_owner = 16ull << 30;
  // Resources used where a request leaves a field at zero (see proto/sandbox.proto).
  v1::Resources defaults = DefaultResources();

  static v1::Resources DefaultResources() {
    v1::Resources r;
    r.set_cpu_millicores(1000);
    r.set_memory_limit_bytes(1ull << 30);
    r.set_pids_limit(256);
    r.set_workspace_bytes(256ull << 20);
    r.set_lifetime_seconds(3600);
    r.set_network("none");
    r.set_image("default");
    r.set_runtime("runc");
    return r;
  }
};

}  // namespace sinew::sandbox
