// Snapshots, fork, pause and resume of sandboxes (docs/sandbox.md, "Snapshots, fork,
// pause and resume"): the SandboxManagerImpl methods that copy a sandbox's writable
// trees into the snapshot store and back.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <filesystem>
#include <thread>

#include "auth/agent_proof.h"
#include "sandboxd/host_setup.h"
#include "sandboxd/oci_spec.h"
#include "sandboxd/sandbox_manager_impl.h"
#include "sandboxd/snapshot_tree.h"

namespace sinew::sandbox {
namespace {

// The writable trees of a sandbox (OCI mounts in oci_spec.cc), relative to its root.
constexpr const char* kWritableTrees[] = {"workspace", "tmp", "dev/shm"};
constexpr uint32_t kMaxForks = 16;

bool KnownTree(const std::string& root) {
  for (const char* t : kWritableTrees) {
    if (root == t) return true;
  }
  return false;
}

// The tree of a memory snapshot: runsc's checkpoint image (its files are the
// sandbox's memory, processes and file systems).
constexpr const char* kCheckpointTree = "checkpoint";

bool IsGvisor(const v1::SandboxInfo& info) { return info.resources().runtime() == "runsc"; }

uint32_t UidBase(const Container& c) { return c.host_uid == 0 ? 0 : c.host_uid - kSandboxUid; }

Result<UniqueFd> OpenContainerRoot(const Container& c) {
  // The container's own root, in its own mount namespace: the tmpfs mounts are visible
  // there. Nothing below it is ever followed (snapshot_tree.h).
  const std::string path = "/proc/" + std::to_string(c.init_pid) + "/root";
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Status::Internal("cannot open the root of " + c.id);
  return fd;
}

std::string NotFound(const std::string& id) { return "no sandbox with id '" + id + "'"; }

}  // namespace

// REQUIRES: mu_ held.
Result<LiveSandbox*> SandboxManagerImpl::TakeForSnapshot(const std::string& id, const std::string& owner) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second->pooled || it->second->info.owner() != owner) {
    if (auto p = paused_.find(id); p != paused_.end() && p->second.info.owner() == owner) {
      return Status::FailedPrecondition("sandbox " + id + " is paused; its files are in snapshot " +
                                        p->second.snapshot_id + " (fork or provision from that)");
    }
    return Status::NotFound(NotFound(id));
  }
  LiveSandbox& e = *it->second;
  if (e.ending) return Status::FailedPrecondition("sandbox " + id + " is ending");
  if (e.busy) return Status::FailedPrecondition("a snapshot or pause of sandbox " + id + " is under way");
  e.busy = true;
  return &e;
}

Result<v1::SnapshotRecord> SandboxManagerImpl::Capture(const Container& c, const v1::SandboxInfo& info,
                                                       SnapshotStore::Writer& writer,
                                                       std::map<std::string, CaptureCache>* cache) {
  const auto start = Clock::now();
  v1::SnapshotRecord record;
  CaptureStats stats;
  SINEW_RETURN_IF_ERROR(runner_.Freeze(c.id));
  Status captured = [&]() -> Status {
    SINEW_ASSIGN_OR_RETURN(UniqueFd root, OpenContainerRoot(c));
    for (const char* name : kWritableTrees) {
      SINEW_ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(root.get(), name));
      CaptureCache* tree_cache = cache != nullptr ? &(*cache)[name] : nullptr;
      const CaptureCache previous = tree_cache != nullptr ? std::move(*tree_cache) : CaptureCache();
      SINEW_ASSIGN_OR_RETURN(*record.add_trees(), CaptureTree(dir.get(), name, writer, UidBase(c), CaptureLimits(),
                                                              stats, &previous, tree_cache));
    }
    return Status::Ok();
  }();
  Status thawed = runner_.Thaw(c.id);
  SINEW_RETURN_IF_ERROR(captured);
  SINEW_RETURN_IF_ERROR(thawed);
  v1::SnapshotInfo& s = *record.mutable_info();
  s.set_id("snap-" + RandomHex(16));
  s.set_owner(info.owner());
  s.set_host(host_name_);
  s.set_source_sandbox(info.id());
  *s.mutable_resources() = info.resources();
  s.set_created_unix_ms(NowUnixMs());
  s.set_logical_bytes(stats.logical_bytes);
  s.set_data_bytes(stats.data_bytes);
  s.set_added_bytes(stats.added_bytes);
  s.set_entries(stats.entries);
  s.set_skipped(stats.skipped);
  s.set_duration_ms(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  return record;
}

Result<v1::SnapshotRecord> SandboxManagerImpl::CaptureCheckpoint(const Container& c, const v1::SandboxInfo& info,
                                                                 SnapshotStore::Writer& writer,
                                                                 std::string* image_dir) {
  const auto start = Clock::now();
  image_dir->clear();
  const std::string dir = config_.state_dir + "/images/" + c.id + "-" + RandomHex(8);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  Status saved = runner_.QuiesceAgent(c);
  const auto quiet = Clock::now();
  if (saved.ok()) {
    saved = runner_.Checkpoint(c.id, dir);
    spdlog::info("{}: agent quiet in {} ms, checkpoint in {} ms", c.id,
                 std::chrono::duration_cast<std::chrono::milliseconds>(quiet - start).count(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - quiet).count());
    if (!saved.ok()) (void)runner_.ReleaseAgent(c);  // when the sandbox still runs, it serves again
  }
  if (!saved.ok()) {
    std::filesystem::remove_all(dir, ec);
    return saved;
  }
  *image_dir = dir;
  const auto checkpointed = Clock::now();
  v1::SnapshotRecord record;
  CaptureStats stats;
  UniqueFd image_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (image_fd.get() < 0) return Status::IOError("cannot open " + dir);
  SINEW_ASSIGN_OR_RETURN(*record.add_trees(),
                         CaptureTree(image_fd.get(), kCheckpointTree, writer, 0, CaptureLimits(), stats));
  v1::SnapshotInfo& s = *record.mutable_info();
  s.set_id("snap-" + RandomHex(16));
  s.set_owner(info.owner());
  s.set_host(host_name_);
  s.set_source_sandbox(info.id());
  *s.mutable_resources() = info.resources();
  s.set_created_unix_ms(NowUnixMs());
  s.set_logical_bytes(stats.logical_bytes);
  s.set_data_bytes(stats.data_bytes);
  s.set_added_bytes(stats.added_bytes);
  s.set_entries(stats.entries);
  s.set_skipped(stats.skipped);
  s.set_memory(true);
  s.set_duration_ms(std::chrono::duration_cast<std::chrono::milliseconds>(checkpointed - start).count());
  return record;
}

Status SandboxManagerImpl::RestartFromCheckpoint(LiveSandbox* e, const std::string& image_dir) {
  const Container old = e->container;
  KillAndRemove(old);
  auto c = runner_.Start(old.id, e->info.resources(), old.secret, image_dir);
  if (!c.ok()) return c.status().WithContext("restore of " + old.id + " from its checkpoint");
  const uint64_t oom_base = OomKills(config_.cgroup_parent, old.id);  // a new cgroup
  std::lock_guard<std::mutex> lock(mu_);
  e->container = *c;
  e->oom_base = oom_base;
  return Status::Ok();
}

Result<std::string> SandboxManagerImpl::MaterializeCheckpoint(const v1::SnapshotRecord& record) {
  if (record.trees_size() != 1 || record.trees(0).root() != kCheckpointTree) {
    return Status::Corruption("memory snapshot " + record.info().id() + " holds no checkpoint image");
  }
  const std::string dir = config_.state_dir + "/images/restore-" + RandomHex(8);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  Status written = fd.get() < 0 ? Status::IOError("cannot open " + dir)
                                : RestoreTree(record.trees(0), fd.get(), *store_, 0);
  if (!written.ok()) {
    std::filesystem::remove_all(dir, ec);
    return written;
  }
  return dir;
}

Status SandboxManagerImpl::RestoreInto(const Container& c, const v1::SnapshotRecord& record) {
  SINEW_ASSIGN_OR_RETURN(UniqueFd root, OpenContainerRoot(c));
  for (const auto& tree : record.trees()) {
    if (!KnownTree(tree.root())) return Status::Corruption("snapshot tree '" + tree.root() + "' is unknown");
    SINEW_ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(root.get(), tree.root()));
    SINEW_RETURN_IF_ERROR(RestoreTree(tree, dir.get(), *store_, UidBase(c)));
  }
  return Status::Ok();
}

Result<v1::Resources> SandboxManagerImpl::RestoreResources(const v1::Resources& requested,
                                                           const v1::SnapshotRecord& record) const {
  const v1::SnapshotInfo& s = record.info();
  if (record.has_paused_sandbox()) {
    return Status::FailedPrecondition("snapshot " + s.id() + " holds paused sandbox " +
                                      record.paused_sandbox().id() + "; Resume it, or Snapshot it once resumed");
  }
  SINEW_ASSIGN_OR_RETURN(v1::Resources r, NormalizeResources(requested, s.resources()));
  if (r.image() != s.resources().image()) {
    return Status::FailedPrecondition("snapshot " + s.id() + " is of image '" + s.resources().image() +
                                      "'; it cannot be restored into image '" + r.image() + "'");
  }
  if (s.memory() && r.runtime() != "runsc") {
    return Status::FailedPrecondition("snapshot " + s.id() + " holds a runsc sandbox's memory and processes; it is "
                                      "restored under runtime 'runsc' only");
  }
  if (!s.memory() && r.runtime() == "runsc") {
    return Status::FailedPrecondition("snapshot " + s.id() + " holds a runc sandbox's files; it is restored "
                                      "under runtime 'runc' only");
  }
  if (r.memory_limit_bytes() < s.resources().memory_limit_bytes()) {
    return Status::FailedPrecondition(
        "snapshot " + s.id() + " was taken with memory_limit_bytes " +
        std::to_string(s.resources().memory_limit_bytes()) + "; a restore needs at least that, not " +
        std::to_string(r.memory_limit_bytes()) +
        (s.memory() ? " (its processes' memory would not fit)" : ""));
  }
  if (r.workspace_bytes() < s.resources().workspace_bytes()) {
    return Status::FailedPrecondition(
        "snapshot " + s.id() + " was taken with workspace_bytes " + std::to_string(s.resources().workspace_bytes()) +
        "; a restore needs at least that, not " + std::to_string(r.workspace_bytes()));
  }
  return r;
}

void SandboxManagerImpl::KillAndRemove(const Container& c) {
  kill(c.init_pid, SIGKILL);
  int status = 0;
  waitpid(c.init_pid, &status, 0);
  runner_.Remove(c.id);
}

void SandboxManagerImpl::LoadPaused() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& record : store_->All()) {
    if (!record.has_paused_sandbox()) continue;
    PausedSandbox p;
    p.info = record.paused_sandbox();
    p.snapshot_id = record.info().id();
    p.secret = record.agent_secret();
    p.lifetime_left = std::chrono::milliseconds(std::max<int64_t>(1000, record.lifetime_left_ms()));
    spdlog::info("{} is paused (snapshot {})", p.info.id(), p.snapshot_id);
    paused_[p.info.id()] = std::move(p);
  }
}

Result<v1::SnapshotInfo> SandboxManagerImpl::Snapshot(const std::string& sandbox_id, const std::string& owner) {
  std::unique_lock<std::mutex> lock(mu_);
  SINEW_ASSIGN_OR_RETURN(LiveSandbox * e, TakeForSnapshot(sandbox_id, owner));
  const Container c = e->container;
  const v1::SandboxInfo info = e->info;
  lock.unlock();
  auto writer = store_->NewWriter();
  Result<v1::SnapshotRecord> record(Status::Internal("not captured"));
  if (IsGvisor(info)) {
    // The checkpoint stops the container; it is restored in place, as it was.
    std::string image_dir;
    record = CaptureCheckpoint(c, info, *writer, &image_dir);
    if (!image_dir.empty()) {
      Status back = RestartFromCheckpoint(e, image_dir);
      std::error_code ec;
      std::filesystem::remove_all(image_dir, ec);
      if (!back.ok()) record = Result<v1::SnapshotRecord>(back.WithContext("snapshot of " + sandbox_id));
    }
  } else {
    record = Capture(c, info, *writer, &e->capture_cache);
  }
  if (!record.ok()) e->capture_cache.clear();
  Result<v1::SnapshotInfo> out = record.ok() ? store_->Commit(std::move(writer), *record)
                                             : Result<v1::SnapshotInfo>(record.status());
  lock.lock();
  e->busy = false;
  ended_cv_.notify_all();
  if (out.ok()) {
    spdlog::info("snapshot {} of {}: {} entries, {} data bytes ({} new) in {} ms", out->id(), sandbox_id,
                 out->entries(), out->data_bytes(), out->added_bytes(), out->duration_ms());
  }
  return out;
}

Result<v1::SnapshotInfo> SandboxManagerImpl::DeleteSnapshot(const std::string& id, const std::string& owner) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [sid, p] : paused_) {
      if (p.snapshot_id == id && p.info.owner() == owner) {
        return Status::FailedPrecondition("snapshot " + id + " holds paused sandbox " + sid +
                                          "; Resume or Destroy the sandbox instead");
      }
    }
  }
  return store_->Delete(id, owner);
}

v1::ListSnapshotsResponse SandboxManagerImpl::ListSnapshots(const std::string& owner) {
  v1::ListSnapshotsResponse out;
  for (auto& s : store_->List(owner)) *out.add_snapshots() = std::move(s);
  out.set_owner_bytes(store_->OwnerBytes(owner));
  out.set_owner_cap_bytes(store_->owner_cap_bytes());
  return out;
}

Result<v1::ForkResponse> SandboxManagerImpl::Fork(const v1::ForkRequest& req, const StillWanted& still_wanted) {
  if (req.sandbox_id().empty() == req.snapshot_id().empty()) {
    return Status::InvalidArgument("name exactly one of sandbox_id and snapshot_id");
  }
  if (req.n() < 1 || req.n() > kMaxForks) {
    return Status::InvalidArgument("n is " + std::to_string(req.n()) + "; 1 to " + std::to_string(kMaxForks));
  }
  v1::ForkResponse out;
  if (!req.sandbox_id().empty()) {
    SINEW_ASSIGN_OR_RETURN(*out.mutable_snapshot(), Snapshot(req.sandbox_id(), req.owner()));
  } else {
    SINEW_ASSIGN_OR_RETURN(v1::SnapshotRecord r, store_->Load(req.snapshot_id(), req.owner()));
    *out.mutable_snapshot() = r.info();
  }
  const Origin origin{req.owner(), out.snapshot().id()};
  std::vector<Result<v1::SandboxInfo>> results(req.n(), Status::Internal("not started"));
  {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < req.n(); ++i) {
      threads.emplace_back([&, i] {
        results[i] = Provision(req.resources(), req.label(), std::chrono::seconds(req.claim_within_seconds()),
                               still_wanted, origin);
      });
    }
    for (auto& t : threads) t.join();
  }
  Status first = Status::Ok();
  for (auto& r : results) {
    if (!r.ok() && first.ok()) first = r.status();
  }
  if (!first.ok()) {
    for (auto& r : results) {
      if (r.ok()) (void)DestroyWith(r->id(), "a sibling of its fork could not be provisioned");
    }
    return first.WithContext("fork of snapshot " + out.snapshot().id());
  }
  for (auto& r : results) *out.add_sandboxes() = std::move(*r);
  return out;
}

Result<v1::SandboxInfo> SandboxManagerImpl::Pause(const std::string& id, const std::string& owner, bool if_idle) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto p = paused_.find(id); p != paused_.end() && p->second.info.owner() == owner) {
    return p->second.info;  // idempotent
  }
  SINEW_ASSIGN_OR_RETURN(LiveSandbox * e, TakeForSnapshot(id, owner));
  const Container c = e->container;
  auto release = [&](Status why) {
    e->busy = false;
    ended_cv_.notify_all();
    return why;
  };
  // A call in flight (a tool's process, or a background job) would be cut off: refused.
  // Under runsc they are checkpointed with the rest and carry on after the resume, unless
  // the pause is an idle timer's: a background job keeps its sandbox awake.
  if (!IsGvisor(e->info) || if_idle) {
    lock.unlock();
    Result<size_t> others = size_t{0};
    if (IsGvisor(e->info)) {
      others = runner_.GvisorProcessesBesidesAgent(id);
    } else if (const auto procs = CgroupProcesses(config_.cgroup_parent, id); procs.size() > 1) {
      others = procs.size() - 1;
    }
    lock.lock();
    if (!others.ok()) return release(others.status().WithContext("pause of " + id));
    if (*others > 0) {
      return release(Status::FailedPrecondition(
          "sandbox " + id + " runs " + std::to_string(*others) +
          " process(es) besides its agent (a tool call or a background job); " +
          (if_idle ? std::string("it is not idle")
                   : std::string("pausing would end them. Wait for them to finish (or kill them), then pause"))));
    }
  }
  v1::SandboxInfo info = e->info;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(e->deadline - Clock::now());
  lock.unlock();
  auto writer = store_->NewWriter();
  std::string image_dir;
  auto record = IsGvisor(info) ? CaptureCheckpoint(c, info, *writer, &image_dir) : Capture(c, info, *writer);
  // Until the pause is committed the checkpoint image can bring the sandbox back.
  auto restart = [&](Status why) {
    if (!image_dir.empty()) {
      if (Status back = RestartFromCheckpoint(e, image_dir); !back.ok()) {
        spdlog::warn("{} stays down after a failed pause: {}", id, back.ToString());
      }
      std::error_code ec;
      std::filesystem::remove_all(image_dir, ec);
    }
    return why;
  };
  if (!record.ok()) {
    Status why = restart(record.status());
    lock.lock();
    return release(why.WithContext("pause of " + id));
  }
  v1::SandboxInfo paused = info;
  paused.set_state(v1::SANDBOX_STATE_PAUSED);
  paused.clear_agent_secret();
  paused.set_host_uid(0);
  *record->mutable_paused_sandbox() = paused;
  record->set_lifetime_left_ms(left.count());
  record->set_agent_secret(c.secret);
  auto committed = store_->Commit(std::move(writer), *record);
  if (!committed.ok()) {
    Status why = restart(committed.status());
    lock.lock();
    return release(why.WithContext("pause of " + id));
  }
  if (!image_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(image_dir, ec);
  }
  lock.lock();
  e->ending = true;  // the monitor leaves its exit alone
  lock.unlock();
  KillAndRemove(c);
  lock.lock();
  PausedSandbox p;
  p.info = info;
  p.info.set_state(v1::SANDBOX_STATE_PAUSED);
  p.info.set_host_uid(0);
  p.snapshot_id = committed->id();
  p.secret = c.secret;
  p.lifetime_left = std::max(left, std::chrono::milliseconds(1000));
  paused_[id] = p;
  live_.erase(id);
  ended_cv_.notify_all();
  pool_cv_.notify_all();
  spdlog::info("{} paused: snapshot {} ({} data bytes, {} new)", id, committed->id(), committed->data_bytes(),
               committed->added_bytes());
  return p.info;
}

Result<v1::SandboxInfo> SandboxManagerImpl::Resume(const std::string& id, const std::string& owner) {
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return Status::Unavailable("the provisioner is shutting down");
  auto it = paused_.find(id);
  if (it == paused_.end() || it->second.info.owner() != owner) {
    auto l = live_.find(id);
    if (l != live_.end() && !l->second->pooled && l->second->info.owner() == owner) return l->second->info;
    return Status::NotFound(NotFound(id));
  }
  if (it->second.resuming) return Status::FailedPrecondition("sandbox " + id + " is being resumed");
  SINEW_ASSIGN_OR_RETURN(v1::SnapshotRecord record, store_->Load(it->second.snapshot_id, owner));
  it->second.resuming = true;  // before ReserveSlot, which may release the lock
  if (Status slot = ReserveSlot(lock); !slot.ok()) {
    paused_.find(id)->second.resuming = false;
    ended_cv_.notify_all();
    return slot;
  }
  const bool memory = record.info().memory();
  std::string checkpoint_image;
  if (memory) {
    lock.unlock();
    auto image = MaterializeCheckpoint(record);
    lock.lock();
    if (!image.ok()) {
      --starting_;
      paused_.find(id)->second.resuming = false;
      ended_cv_.notify_all();
      pool_cv_.notify_all();
      return image.status().WithContext("resume of " + id + " (it stays paused)");
    }
    checkpoint_image = *image;
  }
  struct RemoveImage {
    const std::string& dir;
    ~RemoveImage() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } remove_image{checkpoint_image};
  it = paused_.find(id);
  PausedSandbox& p = it->second;
  const v1::Resources r = p.info.resources();
  auto entry = StartInSlot(lock, p.info.owner(), r, r.SerializeAsString(), [] { return true; }, id, p.secret,
                           checkpoint_image);
  --starting_;
  pool_cv_.notify_all();
  auto fail = [&](Status why) {
    auto again = paused_.find(id);
    if (again != paused_.end()) again->second.resuming = false;
    ended_cv_.notify_all();
    return why.WithContext("resume of " + id + " (it stays paused)");
  };
  if (!entry.ok()) return fail(entry.status());
  Container c = (*entry)->container;
  lock.unlock();
  const auto started = Clock::now();
  Status restored = memory ? Status::Ok() : RestoreInto(c, record);
  const auto files_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (!restored.ok()) KillAndRemove(c);
  lock.lock();
  if (!restored.ok()) return fail(restored);
  it = paused_.find(id);
  LiveSandbox& e = **entry;
  e.info = it->second.info;
  e.info.set_state(v1::SANDBOX_STATE_READY);
  e.info.set_endpoint(c.endpoint);
  e.info.set_agent_secret(c.secret);
  e.info.set_host_uid(c.host_uid);
  e.info.set_memory_restored(memory);
  e.info.set_resumes(e.info.resumes() + 1);
  e.info.set_awaiting_claim(false);
  e.info.set_provision_ms(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  e.deadline = Clock::now() + it->second.lifetime_left;
  e.info.set_handed_over_unix_ms(NowUnixMs());
  const std::string snapshot_id = it->second.snapshot_id;
  paused_.erase(it);
  v1::SandboxInfo info = e.info;
  live_[id] = std::move(*entry);
  ended_cv_.notify_all();
  lock.unlock();
  const auto deleting = Clock::now();
  if (auto deleted = store_->Delete(snapshot_id, owner); !deleted.ok()) {
    spdlog::warn("cannot delete the pause snapshot {} of {}: {}", snapshot_id, id, deleted.status().ToString());
  }
  spdlog::info("{} resumed in {} ms ({}; files {} ms, then the pause snapshot deleted in {} ms)", id,
               info.provision_ms(), memory ? "memory and processes restored" : "files restored; processes started again",
               files_ms, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - deleting).count());
  info.set_resumed_now(true);
  return info;
}

}  // namespace sinew::sandbox
