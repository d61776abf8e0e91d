#include "sandboxd/sandbox_manager.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <optional>
#include <filesystem>

#include "auth/agent_proof.h"
#include "sandboxd/host_setup.h"
#include "sandboxd/oci_spec.h"
#include "sandboxd/sandbox_manager_impl.h"

namespace sinew::sandbox {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// 128 random bits from OpenSSL's generator: unguessable from any number of earlier ids.
std::string NewId() { return "sb-" + RandomHex(16); }

// Caps the host tasks of all sandboxes together (the parent cgroup's pids.max) and returns
// the cap. With runsc sandboxes by default, warns when the kernel's task limits are below
// what the configured sandboxes could take at their ceilings: they are then held by the
// budget (a runsc sandbox whose sentry is refused a thread ends) rather than by the host
// running out of PIDs. kernel.pid_max is the operator's to raise, not the daemon's.
Result<uint64_t> ApplyHostPidsBudget(const ProvisionerConfig& config) {
  HostTaskLimits limits = ReadHostTaskLimits();
  uint64_t budget = config.host_pids_budget;
  if (budget == 0) budget = DefaultHostPidsBudget(limits);
  if (budget == 0) {
    return Status::FailedPrecondition(
        "cannot read kernel.pid_max or kernel.threads-max; pass --host-pids-budget");
  }
  SINEW_RETURN_IF_ERROR(SetParentPidsMax(config.cgroup_parent, budget));
  spdlog::info("host task budget of all sandboxes: {} (kernel.pid_max {}, kernel.threads-max {})",
               budget, limits.pid_max, limits.threads_max);
  if (config.defaults.runtime() == "runsc") {
    const uint64_t need = static_cast<uint64_t>(config.max_sandboxes) *
                          static_cast<uint64_t>(HostPidsLimit(config.defaults.pids_limit(), true));
    if (need > budget) {
      spdlog::warn(
          "{} runsc sandboxes at pids_limit {} may need up to {} host tasks, but the host task "
          "budget is {} (kernel.pid_max {}, kernel.threads-max {}): under fork bombs sandboxes "
          "will be ended when it is reached; raise kernel.pid_max (e.g. to 4194304) and "
          "kernel.threads-max, then --host-pids-budget, or lower --max-sandboxes",
          config.max_sandboxes, config.defaults.pids_limit(), need, budget, limits.pid_max,
          limits.threads_max);
    }
  }
  return budget;
}

}  // namespace

SandboxManagerImpl::~SandboxManagerImpl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  pool_cv_.notify_all();
  start_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (pooler_.joinable()) pooler_.join();
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : live_) ids.push_back(id);
  }
  for (const auto& id : ids) (void)Destroy(id);
  RemoveCgroupParent(config_.cgroup_parent);
}

Status SandboxManagerImpl::Start() {
  // Sandboxes' init processes are re-parented here when runc exits, so that the
  // monitor can collect their exit status.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  SINEW_RETURN_IF_ERROR(runner_.Init());
  {
    // runsc checkpoint images a previous instance was writing or reading (the store
    // keeps every committed one).
    std::error_code ec;
    std::filesystem::remove_all(config_.state_dir + "/images", ec);
  }
  for (const auto& id : runner_.ReapLeftovers()) {
    spdlog::warn("reaped {} left by a previous instance; reported as LOST", id);
    v1::SandboxInfo info;
    info.set_id(id);
    info.set_state(v1::SANDBOX_STATE_ENDED);
    info.set_outcome(v1::SANDBOX_OUTCOME_LOST);
    info.set_outcome_detail("the provisioner restarted after a crash; the sandbox was reaped");
    info.set_ended_unix_ms(NowUnixMs());
    RememberEnded(info);
  }
  SINEW_ASSIGN_OR_RETURN(host_pids_budget_, ApplyHostPidsBudget(config_));
  const std::string snapshot_dir =
      config_.snapshot_dir.empty() ? config_.state_dir + "/snapshots" : config_.snapshot_dir;
  SINEW_ASSIGN_OR_RETURN(store_, SnapshotStore::Open(snapshot_dir, config_.snapshot_bytes_per_owner));
  {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    host_name_ = host;
  }
  LoadPaused();
  auto defaults = NormalizeResources(v1::Resources(), config_.defaults);
  if (!defaults.ok()) return defaults.status().WithContext("default resources");
  if (config_.warm_pool_size > 0 && runner_.ImageRootfs(defaults->image()).ok()) {
    NoteShape(defaults->SerializeAsString(), *defaults);
  }
  monitor_ = std::thread([this] { MonitorLoop(); });
  pooler_ = std::thread([this] { PoolLoop(); });
  return Status::Ok();
}

Result<v1::SandboxInfo> SandboxManagerImpl::Provision(const v1::Resources& requested,
                                                      const std::string& label,
                                                      std::chrono::seconds claim_within,
                                                      const StillWanted& still_wanted,
                                                      const Origin& origin) {
  auto start = Clock::now();
  std::optional<v1::SnapshotRecord> snapshot;
  v1::Resources r;
  if (!origin.from_snapshot.empty()) {
    SINEW_ASSIGN_OR_RETURN(snapshot, store_->Load(origin.from_snapshot, origin.owner));
    SINEW_ASSIGN_OR_RETURN(r, RestoreResources(requested, *snapshot));
  } else {
    SINEW_ASSIGN_OR_RETURN(r, NormalizeResources(requested, config_.defaults));
  }
  SINEW_RETURN_IF_ERROR(runner_.ImageRootfs(r.image()).status());
  std::string shape = r.SerializeAsString();
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return Status::Unavailable("the provisioner is shutting down");
  if (config_.warm_pool_size > 0 && !snapshot) NoteShape(shape, r);
  auto& pool = pool_[shape];
  // A memory snapshot (runsc) is restored into a container of its own.
  const bool memory = snapshot && snapshot->info().memory();
  std::string checkpoint_image;
  if (memory) {
    lock.unlock();
    auto image = MaterializeCheckpoint(*snapshot);
    lock.lock();
    if (!image.ok()) return image.status().WithContext("restore of snapshot " + origin.from_snapshot);
    checkpoint_image = *image;
  }
  struct RemoveImage {
    const std::string& dir;
    ~RemoveImage() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } remove_image{checkpoint_image};
  // A warm sandbox has never run anything: one restores into it as well as into a new one.
  while (!memory && !pool.empty()) {
    std::string id = pool.front();
    pool.pop_front();
    auto it = live_.find(id);
    if (it == live_.end() || it->second->ending) continue;
    if (ProcessGone(it->second->container.init_pid))
      continue;  // died waiting; the monitor reaps it
    LiveSandbox& e = *it->second;
    if (snapshot) {
      e.pooled = false;
      e.busy = true;  // not handed over yet; Destroy waits
      Container c = e.container;
      lock.unlock();
      Status restored = RestoreInto(c, *snapshot);
      lock.lock();
      e.busy = false;
      ended_cv_.notify_all();
      if (!restored.ok()) {
        lock.unlock();
        (void)DestroyWith(id, "its snapshot could not be restored");
        return restored.WithContext("restore of snapshot " + origin.from_snapshot);
      }
    }
    HandOver(e, label, claim_within, start, true, origin);
    pool_cv_.notify_all();
    return e.info;
  }
  SINEW_RETURN_IF_ERROR(ReserveSlot(lock));
  auto entry = StartInSlot(lock, origin.owner, r, shape, still_wanted, {}, {}, checkpoint_image);
  --starting_;
  pool_cv_.notify_all();
  if (!entry.ok()) return entry.status();
  if (snapshot && !memory) {
    Container c = (*entry)->container;
    lock.unlock();
    Status restored = RestoreInto(c, *snapshot);
    if (!restored.ok()) KillAndRemove(c);
    lock.lock();
    if (!restored.ok()) return restored.WithContext("restore of snapshot " + origin.from_snapshot);
  }
  if (!still_wanted()) {
    std::string id = (*entry)->info.id();
    if (snapshot) {
      lock.unlock();
      KillAndRemove((*entry)->container);
      lock.lock();
      return Status::DeadlineExceeded("the caller gave up while sandbox " + id + " was restored");
    }
    Unwanted(lock, std::move(*entry));
    return Status::DeadlineExceeded("the caller gave up while sandbox " + id +
                                    " started; it was not handed over");
  }
  LiveSandbox& e = **entry;
  HandOver(e, label, claim_within, start, false, origin);
  e.info.set_memory_restored(memory);
  v1::SandboxInfo info = e.info;
  live_[info.id()] = std::move(*entry);
  return info;
}

// REQUIRES: mu_ held.
Status SandboxManagerImpl::ReserveSlot(std::unique_lock<std::mutex>& lock) {
  bool reserved = false;
  if (live_.size() + starting_ >= config_.max_sandboxes) {
    // Make room by ending a warm sandbox of another shape, if there is one. The slot is
    // reserved first so that the pool does not refill it meanwhile.
    std::string victim;
    for (auto& [other_shape, ids] : pool_) {
      if (!ids.empty()) {
        victim = ids.front();
        ids.pop_front();
        break;
      }
    }
    if (!victim.empty()) {
      ++starting_;
      reserved = true;
      lock.unlock();
      (void)Destroy(victim);
      lock.lock();
    }
  }
  if (!reserved) {
    if (live_.size() + starting_ >= config_.max_sandboxes) {
      return Status::ResourceExhausted("too many sandboxes (" +
                                       std::to_string(config_.max_sandboxes) +
                                       "); destroy some or raise --max-sandboxes");
    }
    ++starting_;
  }
  return Status::Ok();
}

Result<v1::SandboxInfo> SandboxManagerImpl::Claim(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end() && !it->second->pooled && !it->second->ending && !it->second->unclaimed) {
    LiveSandbox& e = *it->second;
    if (e.info.awaiting_claim()) spdlog::info("{} claimed", id);
    e.info.set_awaiting_claim(false);
    e.claim_deadline = Clock::time_point::max();
    return e.info;
  }
  if (it != live_.end() && !it->second->pooled) {
    return Status::FailedPrecondition("sandbox " + id + " is ending and cannot be claimed");
  }
  SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo ended, EndedInfo(id));
  return Status::FailedPrecondition("sandbox " + id + " ended before it was claimed: " +
                                    ended.outcome_detail());
}

Result<v1::SandboxInfo> SandboxManagerImpl::Destroy(const std::string& id) {
  return DestroyWith(id, "destroyed on request");
}

Result<v1::SandboxInfo> SandboxManagerImpl::DestroyWith(const std::string& id,
                                                        const std::string& detail) {
  std::unique_lock<std::mutex> lock(mu_);
  // A snapshot or pause in progress finishes first (a frozen process cannot die).
  ended_cv_.wait(lock, [&] {
    auto l = live_.find(id);
    auto p = paused_.find(id);
    return (l == live_.end() || !l->second->busy) && (p == paused_.end() || !p->second.resuming);
  });
  if (auto p = paused_.find(id); p != paused_.end()) {
    v1::SandboxInfo info = p->second.info;
    const std::string snapshot_id = p->second.snapshot_id;
    paused_.erase(p);
    if (auto deleted = store_->Delete(snapshot_id, info.owner()); !deleted.ok()) {
      spdlog::warn("cannot delete the pause snapshot {} of {}: {}", snapshot_id, id, deleted.status().ToString());
    }
    info.set_state(v1::SANDBOX_STATE_ENDED);
    info.set_outcome(v1::SANDBOX_OUTCOME_DESTROYED);
    info.set_outcome_detail(detail + " (while paused)");
    info.set_ended_unix_ms(NowUnixMs());
    RememberEnded(info);
    return info;
  }
  auto it = live_.find(id);
  if (it == live_.end()) return EndedInfo(id);
  LiveSandbox& e = *it->second;
  if (e.ending) {
    ended_cv_.wait(lock, [&] { return live_.count(id) == 0; });
    return EndedInfo(id);
  }
  e.ending = true;
  pid_t pid = e.container.init_pid;
  lock.unlock();
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  uint64_t oom = OomKills(config_.cgroup_parent, id);
  CgroupUsage usage = ReadCgroupUsage(config_.cgroup_parent, id);
  runner_.Remove(id);
  lock.lock();
  SetUsage(e.info, usage);
  e.info.set_oom_kills(static_cast<uint32_t>(oom > e.oom_base ? oom - e.oom_base : 0));
  if (oom > e.oom_base) {
    Finish(e, v1::SANDBOX_OUTCOME_OOM,
           "the kernel killed a process at the memory limit of " +
               std::to_string(e.info.resources().memory_limit_bytes()) + " bytes");
  } else {
    Finish(e, v1::SANDBOX_OUTCOME_DESTROYED, detail);
  }
  return EndedInfo(id);
}

Result<v1::SandboxInfo> SandboxManagerImpl::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end() && !it->second->pooled) {
    v1::SandboxInfo info = it->second->info;
    if (!it->second->ending) SetUsage(info, ReadCgroupUsage(config_.cgroup_parent, id));
    return info;
  }
  if (auto p = paused_.find(id); p != paused_.end()) return p->second.info;
  return EndedInfo(id);
}

std::vector<v1::SandboxInfo> SandboxManagerImpl::List(bool include_ended) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::SandboxInfo> out;
  for (auto& [id, e] : live_) {
    if (!e->pooled) out.push_back(e->info);
  }
  for (auto& [id, p] : paused_) out.push_back(p.info);
  if (include_ended) {
    for (const auto& id : ended_order_) out.push_back(ended_.at(id));
  }
  return out;
}

v1::ProvisionerHealthResponse SandboxManagerImpl::Health() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::ProvisionerHealthResponse h;
  h.set_ok(!stopping_);
  h.set_runtime(runner_.runtime_version() +
                (runner_.runsc_version().empty() ? "" : "; " + runner_.runsc_version()));
  for (auto& [id, e] : live_) {
    if (e->pooled) {
      h.set_warm(h.warm() + 1);
    } else {
      h.set_running(h.running() + 1);
    }
  }
  h.set_starting(in_start_);
  for (const auto& [owner, n] : start_line_.WaitingByOwner()) (*h.mutable_waiting_starts())[owner] = n;
  h.set_waiting_refills(static_cast<uint32_t>(start_line_.waiting_refills()));
  if (stopping_) h.set_detail("shutting down");
  return h;
}

std::vector<v1::HostShapeCount> SandboxManagerImpl::Occupancy() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, v1::HostShapeCount> by_shape;
  for (auto& [id, e] : live_) {
    if (e->ending) continue;
    v1::HostShapeCount& c = by_shape[e->shape];
    if (!c.has_resources()) *c.mutable_resources() = e->info.resources();
    if (e->pooled) {
      c.set_warm(c.warm() + 1);
    } else {
      c.set_running(c.running() + 1);
    }
  }
  std::vector<v1::HostShapeCount> out;
  out.reserve(by_shape.size());
  for (auto& [shape, c] : by_shape) out.push_back(std::move(c));
  return out;
}

Result<std::unique_ptr<LiveSandbox>> SandboxManagerImpl::StartInSlot(
    std::unique_lock<std::mutex>& lock, const std::optional<std::string>& owner, const v1::Resources& r,
    const std::string& shape, const StillWanted& still_wanted, const std::string& id, const std::string& secret,
    const std::string& checkpoint_image) {
  // A waiter takes a slot only when the line names it next (owners take turns), so that
  // under one owner's burst another owner's start waits for at most one of the burst.
  const StartLine::Ticket me = owner ? start_line_.JoinOwner(*owner) : start_line_.JoinRefill();
  auto leave = [&] {
    start_line_.Leave(me);
    start_cv_.notify_all();
  };
  for (;;) {
    if (stopping_) {
      leave();
      return Status::Unavailable("the provisioner is shutting down");
    }
    if (!still_wanted()) {
      const size_t ahead = start_line_.Ahead(me);
      leave();
      return Status::DeadlineExceeded("the caller gave up while the sandbox waited to start (" +
                                      std::to_string(ahead) + " ahead of it, " + std::to_string(start_limit_) +
                                      " starting at once); nothing was started");
    }
    if (start_line_.Next() == me && in_start_ < start_limit_) break;
    // Polled as well: the caller's cancellation does not signal this condition variable.
    start_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  start_line_.Serve(me);
  ++in_start_;
  start_cv_.notify_all();  // the next in line may take another free slot
  lock.unlock();
  auto entry = StartEntry(r, shape, id, secret, checkpoint_image);
  lock.lock();
  --in_start_;
  start_cv_.notify_all();
  return entry;
}

// REQUIRES: mu_ held (released and taken again).
void SandboxManagerImpl::Unwanted(std::unique_lock<std::mutex>& lock,
                                  std::unique_ptr<LiveSandbox> entry) {
  const std::string id = entry->info.id();
  auto shape_pool = pool_.find(entry->shape);  // gone when the shape left the warm shapes
  const bool pool = config_.warm_pool_size > 0 && !stopping_ && shape_pool != pool_.end() &&
                    shape_pool->second.size() < config_.warm_pool_size;
  entry->pooled = pool;
  live_[id] = std::move(entry);
  if (pool) {
    shape_pool->second.push_back(id);
    pool_cv_.notify_all();
    spdlog::info("{} started after its caller gave up; kept in the warm pool", id);
    return;
  }
  spdlog::info("{} started after its caller gave up; destroying it", id);
  lock.unlock();
  (void)DestroyWith(id, "its caller gave up before it was handed over");
  lock.lock();
}

Result<std::unique_ptr<LiveSandbox>> SandboxManagerImpl::StartEntry(const v1::Resources& r,
                                                                    const std::string& shape,
                                                                    const std::string& given_id,
                                                                    const std::string& secret,
                                                                    const std::string& checkpoint_image) {
  std::string id = given_id.empty() ? NewId() : given_id;
  SINEW_ASSIGN_OR_RETURN(Container c, runner_.Start(id, r, secret, checkpoint_image));
  auto e = std::make_unique<LiveSandbox>();
  e->container = c;
  e->shape = shape;
  e->oom_base = OomKills(config_.cgroup_parent, id);
  e->info.set_id(id);
  e->info.set_endpoint(c.endpoint);
  e->info.set_agent_secret(c.secret);
  e->info.set_host_uid(c.host_uid);
  *e->info.mutable_resources() = r;
  e->info.set_state(v1::SANDBOX_STATE_READY);
  e->info.set_created_unix_ms(NowUnixMs());
  return e;
}

// REQUIRES: mu_ held.
void SandboxManagerImpl::HandOver(LiveSandbox& e, const std::string& label,
                                  std::chrono::seconds claim_within, Clock::time_point start,
                                  bool from_pool, const Origin& origin) {
  e.pooled = false;
  e.deadline = Clock::now() + std::chrono::seconds(e.info.resources().lifetime_seconds());
  e.info.set_awaiting_claim(claim_within.count() > 0);
  e.claim_deadline = claim_within.count() > 0 ? Clock::now() + claim_within : Clock::time_point::max();
  e.info.set_from_warm_pool(from_pool);
  e.info.set_provision_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  e.info.set_label(label);
  e.info.set_owner(origin.owner);
  e.info.set_from_snapshot(origin.from_snapshot);
  e.info.set_memory_restored(false);
  e.info.set_handed_over_unix_ms(NowUnixMs());
  spdlog::info("{} handed over in {} ms{} label='{}'", e.info.id(), e.info.provision_ms(),
               from_pool ? " from the warm pool" : "", label);
}

// REQUIRES: mu_ held. Moves a live entry to the ended list.
void SandboxManagerImpl::Finish(LiveSandbox& e, v1::SandboxOutcome outcome, std::string detail) {
  spdlog::info("{} ended: {} ({}){}", e.info.id(), v1::SandboxOutcome_Name(outcome), detail,
               e.pooled ? " [warm pool]" : "");
  e.info.set_state(v1::SANDBOX_STATE_ENDED);
  e.info.set_outcome(outcome);
  e.info.set_outcome_detail(std::move(detail));
  e.info.set_ended_unix_ms(NowUnixMs());
  bool pooled = e.pooled;
  v1::SandboxInfo info = e.info;
  live_.erase(info.id());
  if (!pooled) RememberEnded(info);
  ended_cv_.notify_all();
  pool_cv_.notify_all();
}

// REQUIRES: mu_ held (or single-threaded start-up).
void SandboxManagerImpl::RememberEnded(const v1::SandboxInfo& info) {
  if (ended_.emplace(info.id(), info).second) ended_order_.push_back(info.id());
  while (ended_order_.size() > kEndedKept) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

// REQUIRES: mu_ held.
Result<v1::SandboxInfo> SandboxManagerImpl::EndedInfo(const std::string& id) const {
  auto it = ended_.find(id);
  if (it == ended_.end()) return Status::NotFound("no sandbox with id '" + id + "'");
  return it->second;
}

Result<std::unique_ptr<SandboxManager>> SandboxManager::Create(const ProvisionerConfig& config) {
  auto impl = std::make_unique<SandboxManagerImpl>(config);
  SINEW_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<SandboxManager>(std::move(impl));
}

}  // namespace sinew::sandbox
