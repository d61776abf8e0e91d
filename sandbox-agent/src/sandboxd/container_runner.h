// ContainerRunner: starts one sandbox container with runc and removes it again, and
// reaps what a previous daemon left behind. Knows nothing of pools or outcomes.
//
// Layout below config.state_dir:
//   runc/                 runc's --root (container state)
//   agent/                a tmpfs of its own with the agent and its libraries,
//                         bind-mounted read-only (mountinfo then shows only "/")
//   sandboxes/<id>/       bundle/config.json, agent.sock, agent.log — root's, 0700
//                         except the socket; nothing below state_dir is mounted into
//                         a sandbox but agent/, so a sandbox can neither see nor
//                         redirect its socket.
//
// Thread-safety: Start and Remove may run concurrently for different ids.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sandboxd/config.h"
#include "sandboxd/process.h"
#include "sinew/status.h"

namespace sinew::sandbox {

struct Container {
  std::string id;
  std::string dir;       // state_dir/sandboxes/<id>
  std::string endpoint;  // unix://.../agent.sock
  std::string secret;    // the agent's per-sandbox secret (auth/agent_proof.h)
  uint32_t host_uid = 0;  // host uid of the sandbox user (uid 1000 inside); 0: no user namespace
  pid_t init_pid = -1;   // the agent, PID 1 of the container; a child of this process
};

class ContainerRunner {
 public:
  explicit ContainerRunner(const ProvisionerConfig& config);
  // Unmounts the agent's tmpfs.
  ~ContainerRunner();
  ContainerRunner(const ContainerRunner&) = delete;
  ContainerRunner& operator=(const ContainerRunner&) = delete;

  // Creates the state directories and the agent's files. Fails with a message that
  // says what to do when runc or the agent is missing.
  [[nodiscard]] Status Init();
  // Kills and deletes every container and cgroup a previous instance left, removes its
  // sandbox directories, and returns their ids.
  std::vector<std::string> ReapLeftovers();
  // Path of image `name`'s root file system; kFailedPrecondition (with how to build it)
  // when the image is missing.
  [[nodiscard]] Result<std::string> ImageRootfs(const std::string& name) const;
  // Starts a container with these (defaulted, validated) resources and waits until its
  // agent accepts connections. On error nothing is left behind. `secret`: the agent's
  // secret (a resumed sandbox keeps its own); empty: a new random one.
  // `checkpoint_image` (runsc only): a directory written by Checkpoint; the container is
  // restored from it (`runsc restore`) with its memory and processes, and its agent
  // serves under `id` and the secret from then on.
  [[nodiscard]] Result<Container> Start(const std::string& id, const v1::Resources& resources,
                                        const std::string& secret = {},
                                        const std::string& checkpoint_image = {});
  // runsc: gVisor's checkpoint cannot save a host socket, and the agent's socket and its
  // connections are host sockets. Asks the agent to close them all (SIGUSR1 through
  // `runsc kill`; its socket binder, socket_binder.h) and waits until it has: its socket
  // file is gone. On failure the agent is told to serve again.
  [[nodiscard]] Status QuiesceAgent(const Container& c);
  // runsc: hands the quiesced agent of `c` its identity (c.id, c.secret), on which it binds
  // its socket again, and waits until it accepts connections.
  [[nodiscard]] Status ReleaseAgent(const Container& c);
  // runsc: `runsc checkpoint` of a quiesced container into `image_dir` (which must
  // exist). The container stops; Remove it after.
  [[nodiscard]] Status Checkpoint(const std::string& id, const std::string& image_dir);
  // Freezes every process of a container, and thaws them again: a runc container through
  // its cgroup's freezer, a runsc one with `runsc pause` / `resume`.
  [[nodiscard]] Status Freeze(const std::string& id);
  [[nodiscard]] Status Thaw(const std::string& id);
  // runsc: how many processes run in the sandbox besides its agent (PID 1) and the
  // agent's socket binder (uid 0, its child): tool calls and background jobs, from
  // `runsc ps`. (Under runc the sandbox's cgroup tells: CgroupProcesses.)
  [[nodiscard]] Result<size_t> GvisorProcessesBesidesAgent(const std::string& id) const;
  // Deletes the container (its init must have been reaped or be killable), its cgroups
  // and its directory. Idempotent.
  void Remove(const std::string& id);
  // Ranges in use (for tests and Health).
  size_t uid_ranges_in_use() const;
  // Last lines of the agent's log, for error messages.
  std::string LogTail(const std::string& id) const;
  // Why gVisor's sentry of `id` stopped, when it panicked (Go runtime messages from
  // runsc's --panic-log, last lines); empty otherwise. Read before Remove.
  std::string SentryPanic(const std::string& id) const;

  // First line of `runc --version`, e.g. "runc version 1.1.5+ds1". Set by Init.
  const std::string& runtime_version() const { return runtime_version_; }
  std::string runc_root() const { return config_.state_dir + "/runc"; }
  std::string runsc_root() const { return config_.state_dir + "/runsc"; }
  // First line of `runsc --version`; empty when runsc is not usable. Set by Init.
  const std::string& runsc_version() const { return runsc_version_; }
  std::string sandbox_dir(const std::string& id) const {
    return config_.state_dir + "/sandboxes/" + id;
  }

 private:
  // Kills and reaps runsc's gofer process of `id` (from runsc's state file) while it is
  // this daemon's unreaped child.
  void ReapGofer(const std::string& id) const;
  std::vector<std::string> Runc(std::initializer_list<std::string> args) const;
  // The command line of `runtime` ("runc" or "runsc") with its root and global flags.
  std::vector<std::string> Runtime(const std::string& runtime,
                                   std::initializer_list<std::string> args) const;
  std::string RuntimeOf(const std::string& id) const;
  // After `runtime run --detach` (`run`): reads the pid and waits until the agent accepts
  // connections on `socket_path`; on any failure removes everything and says why.
  [[nodiscard]] Result<Container> AwaitAgent(Container c, const std::string& runtime,
                                             const Result<ProcessResult>& run,
                                             const std::string& socket_path);
  [[nodiscard]] Result<Container> StartGvisor(const std::string& id, const v1::Resources& resources,
                                              const std::string& rootfs, const std::string& secret,
                                              const std::string& checkpoint_image);
  // The configured uid range is valid and overlaps no host account or subordinate range.
  [[nodiscard]] Status CheckUidRange() const;
  // Claims a free user-namespace slot for `id` (kResourceExhausted when none is free).
  [[nodiscard]] Result<uint32_t> AcquireUidBase(const std::string& id);
  void ReleaseUidBase(const std::string& id);

  const ProvisionerConfig config_;
  mutable std::mutex ids_mu_;
  std::map<std::string, uint32_t> uid_slots_;  // sandbox id -> slot; guarded by ids_mu_
  std::map<std::string, std::string> runtimes_;  // sandbox id -> "runsc" (absent: runc); guarded by ids_mu_
  bool swap_accounting_ = false;  // constant after Init
  bool agent_static_ = true;      // constant after Init
  bool agent_mounted_ = false;    // constant after Init
  std::string runtime_version_;   // constant after Init
  std::string runsc_version_;     // constant after Init; empty: runsc not usable
};

}  // namespace sinew::sandbox
