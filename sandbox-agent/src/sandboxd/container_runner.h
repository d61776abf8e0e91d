// ContainerRunner: starts one sandbox container with runc and removes it again, and
// reaps what a previous daemon left behind. Knows nothing of pools or outcomes.
//
// Layout below config.state_dir:
//   runc/                 runc's --root (container state)
//   agent/                the agent and its libraries, bind-mounted read-only
//   sandboxes/<id>/       bundle/config.json, run/agent.sock, agent.log
//
// Thread-safety: Start and Remove may run concurrently for different ids.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sandboxd/config.h"
#include "sinew/status.h"

namespace sinew::sandbox {

struct Container {
  std::string id;
  std::string dir;        // state_dir/sandboxes/<id>
  std::string endpoint;   // unix://.../run/agent.sock
  pid_t init_pid = -1;    // the agent, PID 1 of the container; a child of this process
};

class ContainerRunner {
 public:
  explicit ContainerRunner(const ProvisionerConfig& config);

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
  // agent accepts connections. On error nothing is left behind.
  [[nodiscard]] Result<Container> Start(const std::string& id, const v1::Resources& resources);
  // Deletes the container (its init must have been reaped or be killable), its cgroups
  // and its directory. Idempotent.
  void Remove(const std::string& id);
  // Last lines of the agent's log, for error messages.
  std::string LogTail(const std::string& id) const;

  std::string runc_root() const { return config_.state_dir + "/runc"; }
  std::string sandbox_dir(const std::string& id) const { return config_.state_dir + "/sandboxes/" + id; }

 private:
  std::vector<std::string> Runc(std::initializer_list<std::string> args) const;

  const ProvisionerConfig config_;
  bool swap_accounting_ = false;  // constant after Init
  bool agent_static_ = true;      // constant after Init
};

}  // namespace sinew::sandbox
