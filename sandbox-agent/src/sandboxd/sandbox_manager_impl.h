// SandboxManagerImpl: the provisioner's state and threads, shared by
// sandbox_manager.cc (API and sandbox lifecycle) and sandbox_pool_monitor.cc (warm
// pools and the monitor). Internal to sinew-sandboxd.
//
// Thread-safety: public methods are thread-safe; fields below mu_ are guarded by it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sandboxd/container_runner.h"
#include "sandboxd/host_setup.h"
#include "sandboxd/sandbox_manager.h"
#include "sandboxd/snapshot_store.h"
#include "sandboxd/start_line.h"

namespace sinew::sandbox {

// Copies what the cgroup reported into `info` (keeps earlier figures the read missed).
inline void SetUsage(v1::SandboxInfo& info, const CgroupUsage& u) {
  if (u.memory_peak_bytes != 0) info.set_memory_peak_bytes(u.memory_peak_bytes);
  if (u.cpu_usage_ns != 0) info.set_cpu_usage_ns(u.cpu_usage_ns);
}

using Clock = std::chrono::steady_clock;
inline constexpr auto kMonitorInterval = std::chrono::milliseconds(50);
inline constexpr size_t kEndedKept = 2000;

// One live sandbox (handed out or waiting in a warm pool).
struct LiveSandbox {
  Container container;
  v1::SandboxInfo info;
  std::string shape;
  bool pooled = false;
  bool ending = false;    // Destroy or the monitor is taking it down
  bool oom = false;       // the monitor saw an OOM kill and killed it
  bool lifetime = false;  // the monitor killed it at its lifetime
  bool unclaimed = false;  // the monitor killed it: its hand-over was not claimed in time
  bool busy = false;       // frozen for a snapshot or being paused; Destroy waits for it
  // What its last snapshot saw per writable tree (snapshot_tree.h); only the thread
  // that set `busy` touches it.
  std::map<std::string, CaptureCache> capture_cache;
  uint64_t oom_base = 0;
  Clock::time_point deadline = Clock::time_point::max();
  // When the monitor ends it unclaimed; max() unless info.awaiting_claim() (always for a
  // pooled one: only a hand-over sets it, and a handed-over sandbox never goes back).
  Clock::time_point claim_deadline = Clock::time_point::max();
};

// A sandbox stopped by Pause: its files are in snapshot `snapshot_id`.
struct PausedSandbox {
  v1::SandboxInfo info;  // state PAUSED
  std::string snapshot_id;
  std::string secret;
  std::chrono::milliseconds lifetime_left{0};
  bool resuming = false;  // Resume is starting it; Destroy waits for it
};

class SandboxManagerImpl final : public SandboxManager {
 public:
  explicit SandboxManagerImpl(const ProvisionerConfig& config)
      : config_(config), runner_(config), start_limit_(StartLimit(config)) {}

  ~SandboxManagerImpl() override;
  Status Start();
  Result<v1::SandboxInfo> Provision(const v1::Resources& requested, const std::string& label,
                                    std::chrono::seconds claim_within,
                                    const StillWanted& still_wanted, const Origin& origin = {}) override;
  Result<v1::SandboxInfo> Claim(const std::string& id) override;
  Result<v1::SandboxInfo> Destroy(const std::string& id) override;
  Result<v1::SandboxInfo> Get(const std::string& id) override;
  std::vector<v1::SandboxInfo> List(bool include_ended) override;
  v1::ProvisionerHealthResponse Health() override;
  std::vector<v1::HostShapeCount> Occupancy() override;
  Result<v1::SnapshotInfo> Snapshot(const std::string& sandbox_id, const std::string& owner) override;
  Result<v1::SnapshotInfo> DeleteSnapshot(const std::string& id, const std::string& owner) override;
  v1::ListSnapshotsResponse ListSnapshots(const std::string& owner) override;
  Result<v1::ForkResponse> Fork(const v1::ForkRequest& request, const StillWanted& still_wanted) override;
  Result<v1::SandboxInfo> Pause(const std::string& id, const std::string& owner, bool if_idle) override;
  Result<v1::SandboxInfo> Resume(const std::string& id, const std::string& owner) override;

 private:
  // Snapshots (sandbox_snapshots.cc).
  // REQUIRES: mu_ held (released while it copies, held again on return). Marks the
  // handed-out sandbox `id` of `owner` busy and returns it; kNotFound / kFailedPrecondition.
  Result<LiveSandbox*> TakeForSnapshot(const std::string& id, const std::string& owner);
  // Freezes the container, copies its writable trees into the store, thaws it; the
  // record is not committed yet.
  Result<v1::SnapshotRecord> Capture(const Container& c, const v1::SandboxInfo& info,
                                     SnapshotStore::Writer& writer,
                                     std::map<std::string, CaptureCache>* cache = nullptr);
  // runsc: checkpoints the container (its memory, processes and files) into a new
  // directory below the state directory, named in *image_dir, and copies that into the
  // store; the container has stopped when it returns (also on most errors: the caller
  // removes it, or starts it again from *image_dir while that exists).
  Result<v1::SnapshotRecord> CaptureCheckpoint(const Container& c, const v1::SandboxInfo& info,
                                               SnapshotStore::Writer& writer, std::string* image_dir);
  // runsc: removes the stopped container of `e` (busy) and restores it, same id and
  // secret, from `image_dir`.
  Status RestartFromCheckpoint(LiveSandbox* e, const std::string& image_dir);
  // runsc: writes a memory snapshot's checkpoint image into a new directory below the
  // state directory and returns it (the caller removes it once the container started).
  Result<std::string> MaterializeCheckpoint(const v1::SnapshotRecord& record);
  // Writes the snapshot's trees into a freshly started container (nothing runs in it yet).
  Status RestoreInto(const Container& c, const v1::SnapshotRecord& record);
  // Checks that `requested` (zero fields: the snapshot's) can hold the snapshot.
  Result<v1::Resources> RestoreResources(const v1::Resources& requested, const v1::SnapshotRecord& record) const;
  // Kills and removes a container that was never handed over or is being paused.
  void KillAndRemove(const Container& c);
  // REQUIRES: mu_ held. Reserves a start slot against max_sandboxes (ending a warm
  // sandbox of another shape when that makes room); kResourceExhausted when none.
  Status ReserveSlot(std::unique_lock<std::mutex>& lock);
  // Paused sandboxes from the store's records (start-up).
  void LoadPaused();

  // Waits for a start slot (`lock` holds mu_ and is held again on return), then starts a
  // container with mu_ released. `owner`: whose start it is, its turn in the start line
  // (start_line.h); nullopt: a warm-pool refill. Fails with kDeadlineExceeded, starting
  // nothing, when `still_wanted` turns false while it waits; kUnavailable when the daemon
  // stops. `id` and `secret`: those of a resumed sandbox; empty: new ones.
  // `checkpoint_image`: restore a runsc checkpoint (ContainerRunner::Start).
  Result<std::unique_ptr<LiveSandbox>> StartInSlot(std::unique_lock<std::mutex>& lock,
                                                   const std::optional<std::string>& owner,
                                                   const v1::Resources& r, const std::string& shape,
                                                   const StillWanted& still_wanted,
                                                   const std::string& id = {}, const std::string& secret = {},
                                                   const std::string& checkpoint_image = {});
  Result<std::unique_ptr<LiveSandbox>> StartEntry(const v1::Resources& r, const std::string& shape,
                                                  const std::string& id, const std::string& secret,
                                                  const std::string& checkpoint_image);
  // REQUIRES: mu_ held (released and taken again). A sandbox that started for a caller
  // who is gone: into its shape's warm pool when there is room, else destroyed.
  void Unwanted(std::unique_lock<std::mutex>& lock, std::unique_ptr<LiveSandbox> entry);
  // Kills and removes a live sandbox, recording `detail` when it ended on request.
  Result<v1::SandboxInfo> DestroyWith(const std::string& id, const std::string& detail);
  // REQUIRES: mu_ held.
  void HandOver(LiveSandbox& e, const std::string& label, std::chrono::seconds claim_within,
                Clock::time_point start, bool from_pool, const Origin& origin);
  // REQUIRES: mu_ held. Moves a live entry to the ended list.
  void Finish(LiveSandbox& e, v1::SandboxOutcome outcome, std::string detail);
  // REQUIRES: mu_ held (or single-threaded start-up).
  void RememberEnded(const v1::SandboxInfo& info);
  // REQUIRES: mu_ held.
  Result<v1::SandboxInfo> EndedInfo(const std::string& id) const;
  // REQUIRES: mu_ held. Remembers a shape for the warm pools (most recent first).
  void NoteShape(const std::string& shape, const v1::Resources& r);
  // Threads: keep the warm pools full; watch live sandboxes (sandbox_pool_monitor.cc).
  void PoolLoop();
  void MonitorLoop();

  static uint32_t StartLimit(const ProvisionerConfig& config) {
    if (config.max_concurrent_starts > 0) return config.max_concurrent_starts;
    return std::max(8u, 8 * std::thread::hardware_concurrency());
  }

  // Constant after construction.
  const ProvisionerConfig config_;
  ContainerRunner runner_;
  const uint32_t start_limit_;
  uint64_t host_pids_budget_ = 0;  // set by Start(), before the threads
  std::unique_ptr<SnapshotStore> store_;  // set by Start()
  std::string host_name_;                 // set by Start()
  std::thread monitor_;
  std::thread pooler_;

  std::mutex mu_;
  std::condition_variable pool_cv_;   // pool or sandbox set changed, or stopping
  std::condition_variable ended_cv_;  // a sandbox ended
  bool stopping_ = false;             // guarded by mu_
  uint32_t starting_ = 0;             // guarded by mu_ (slots reserved against max_sandboxes)
  uint32_t in_start_ = 0;             // guarded by mu_ (containers starting now)
  std::condition_variable start_cv_;  // a start slot or the head of the line came free, or stopping
  StartLine start_line_;              // starts waiting for a slot; guarded by mu_
  std::map<std::string, std::unique_ptr<LiveSandbox>> live_;  // guarded by mu_
  std::map<std::string, std::deque<std::string>> pool_;       // shape -> ids; guarded by mu_
  std::deque<std::pair<std::string, v1::Resources>> shapes_;  // warm shapes; guarded by mu_
  std::map<std::string, v1::SandboxInfo> ended_;              // guarded by mu_
  std::deque<std::string> ended_order_;                       // guarded by mu_
  std::map<std::string, PausedSandbox> paused_;               // guarded by mu_
};

int64_t NowUnixMs();

}  // namespace sinew::sandbox
