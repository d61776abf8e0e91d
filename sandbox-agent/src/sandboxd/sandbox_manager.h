// SandboxManager: the provisioner's logic. Hands out sandboxes (from warm pools per
// resource shape when it can), watches them for exit, OOM kills and lifetime, reports
// how each ended, and removes everything of a sandbox once it ended.
//
// Ownership: owns its ContainerRunner, its threads and all sandboxes; the destructor
// destroys every sandbox it still holds.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandboxd/config.h"
#include "sinew/proto/coord.pb.h"
#include "sinew/proto/sandbox.pb.h"
#include "sinew/status.h"

namespace sinew::sandbox {

class SandboxManager {
 public:
  virtual ~SandboxManager() = default;

  // Prepares the state directory, reaps what a crashed previous instance left (those
  // sandboxes are then reported as LOST by Get), and starts the monitor and the pool.
  [[nodiscard]] static Result<std::unique_ptr<SandboxManager>> Create(
      const ProvisionerConfig& config);

  // Whether the caller of a Provision still waits for its answer (its RPC is not
  // cancelled and enough of its deadline is left for the answer to reach it; the
  // service keeps a 1 s margin).
  using StillWanted = std::function<bool()>;

  // Who a new sandbox belongs to and what it starts from (ProvisionRequest.owner and
  // from_snapshot).
  struct Origin {
    std::string owner;
    std::string from_snapshot;
  };

  // A ready sandbox. Container starts wait for one of max_concurrent_starts slots; a
  // caller that gives up meanwhile gets kDeadlineExceeded and nothing is started, and a
  // sandbox that comes up after its caller gave up goes to the warm pool (when its shape
  // has room) or is destroyed, never left running unowned. With `claim_within` > 0 the
  // sandbox is ended (UNCLAIMED) unless Claim confirms the hand-over within that time:
  // what closes the last gap, an answer lost on its way to the caller.
  [[nodiscard]] virtual Result<v1::SandboxInfo> Provision(const v1::Resources& resources,
                                                          const std::string& label,
                                                          std::chrono::seconds claim_within,
                                                          const StillWanted& still_wanted,
                                                          const Origin& origin = {}) = 0;
  // Confirms the hand-over of a sandbox provisioned with `claim_within`; idempotent.
  // kFailedPrecondition when it already ended, kNotFound for an unknown id.
  [[nodiscard]] virtual Result<v1::SandboxInfo> Claim(const std::string& id) = 0;
  [[nodiscard]] virtual Result<v1::SandboxInfo> Destroy(const std::string& id) = 0;
  [[nodiscard]] virtual Result<v1::SandboxInfo> Get(const std::string& id) = 0;
  virtual std::vector<v1::SandboxInfo> List(bool include_ended) = 0;
  virtual v1::ProvisionerHealthResponse Health() = 0;
  // Live sandboxes (handed out and warm) grouped by shape, with their resources filled
  // in; what this host publishes for placement (docs/scale-out.md).
  virtual std::vector<v1::HostShapeCount> Occupancy() = 0;

  // Snapshots, fork, pause and resume: see the Provisioner service in proto/sandbox.proto
  // for what each answers. A sandbox or snapshot of another owner is kNotFound.
  [[nodiscard]] virtual Result<v1::SnapshotInfo> Snapshot(const std::string& sandbox_id,
                                                          const std::string& owner) = 0;
  [[nodiscard]] virtual Result<v1::SnapshotInfo> DeleteSnapshot(const std::string& id,
                                                                const std::string& owner) = 0;
  virtual v1::ListSnapshotsResponse ListSnapshots(const std::string& owner) = 0;
  [[nodiscard]] virtual Result<v1::ForkResponse> Fork(const v1::ForkRequest& request,
                                                      const StillWanted& still_wanted) = 0;
  // `if_idle`: refused (kFailedPrecondition) while a process besides the agent runs.
  [[nodiscard]] virtual Result<v1::SandboxInfo> Pause(const std::string& id, const std::string& owner,
                                                      bool if_idle = false) = 0;
  [[nodiscard]] virtual Result<v1::SandboxInfo> Resume(const std::string& id, const std::string& owner) = 0;
};

// Fills zero fields from `defaults` and checks ranges; kInvalidArgument says which field.
[[nodiscard]] Result<v1::Resources> NormalizeResources(const v1::Resources& requested,
                                                       const v1::Resources& defaults);

}  // namespace sinew::sandbox
