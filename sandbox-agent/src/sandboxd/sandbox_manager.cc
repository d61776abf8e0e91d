#include "sandboxd/sandbox_manager.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "sandboxd/container_runner.h"
#include "sandboxd/host_setup.h"

namespace sinew::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kMonitorInterval = std::chrono::milliseconds(50);
constexpr size_t kEndedKept = 2000;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string NewId() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  char buf[32];
  snprintf(buf, sizeof(buf), "sb-%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

struct Entry {
  Container container;
  v1::SandboxInfo info;
  std::string shape;
  bool pooled = false;
  bool ending = false;          // Destroy or the monitor is taking it down
  bool oom = false;             // the monitor saw an OOM kill and killed it
  bool lifetime = false;        // the monitor killed it at its lifetime
  uint64_t oom_base = 0;
  Clock::time_point deadline = Clock::time_point::max();
};

class SandboxManagerImpl final : public SandboxManager {
 public:
  explicit SandboxManagerImpl(const ProvisionerConfig& config) : config_(config), runner_(config) {}

  ~SandboxManagerImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    pool_cv_.notify_all();
    if (monitor_.joinable()) monitor_.join();
    if (pooler_.joinable()) pooler_.join();
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, e] : live_) ids.push_back(id);
    }
    for (const auto& id : ids) (void)Destroy(id);
  }

  Status Start() {
    // Sandboxes' init processes are re-parented here when runc exits, so that the
    // monitor can collect their exit status.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    SINEW_RETURN_IF_ERROR(runner_.Init());
    for (const auto& id : runner_.ReapLeftovers()) {
      v1::SandboxInfo info;
      info.set_id(id);
      info.set_state(v1::SANDBOX_STATE_ENDED);
      info.set_outcome(v1::SANDBOX_OUTCOME_LOST);
      info.set_outcome_detail("the provisioner restarted after a crash; the sandbox was reaped");
      info.set_ended_unix_ms(NowUnixMs());
      RememberEnded(info);
    }
    auto defaults = NormalizeResources(v1::Resources(), config_.defaults);
    if (!defaults.ok()) return defaults.status().WithContext("default resources");
    if (config_.warm_pool_size > 0 && runner_.ImageRootfs(defaults->image()).ok()) {
      NoteShape(defaults->SerializeAsString(), *defaults);
    }
    monitor_ = std::thread([this] { MonitorLoop(); });
    pooler_ = std::thread([this] { PoolLoop(); });
    return Status::Ok();
  }

  Result<v1::SandboxInfo> Provision(const v1::Resources& requested, const std::string& label) override {
    auto start = Clock::now();
    SINEW_ASSIGN_OR_RETURN(v1::Resources r, NormalizeResources(requested, config_.defaults));
    SINEW_RETURN_IF_ERROR(runner_.ImageRootfs(r.image()).status());
    std::string shape = r.SerializeAsString();
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("the provisioner is shutting down");
    if (config_.warm_pool_size > 0) NoteShape(shape, r);
    auto& pool = pool_[shape];
    while (!pool.empty()) {
      std::string id = pool.front();
      pool.pop_front();
      auto it = live_.find(id);
      if (it == live_.end() || it->second->ending) continue;
      Entry& e = *it->second;
      HandOver(e, label, start, true);
      pool_cv_.notify_all();
      return e.info;
    }
    if (live_.size() + starting_ >= config_.max_sandboxes) {
      return Status::ResourceExhausted("too many sandboxes (" + std::to_string(config_.max_sandboxes) +
                                       "); destroy some or raise --max-sandboxes");
    }
    ++starting_;
    lock.unlock();
    auto entry = StartEntry(r, shape);
    lock.lock();
    --starting_;
    pool_cv_.notify_all();
    if (!entry.ok()) return entry.status();
    Entry& e = **entry;
    HandOver(e, label, start, false);
    v1::SandboxInfo info = e.info;
    live_[info.id()] = std::move(*entry);
    return info;
  }

  Result<v1::SandboxInfo> Destroy(const std::string& id) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return EndedInfo(id);
    Entry& e = *it->second;
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
    runner_.Remove(id);
    lock.lock();
    e.info.set_oom_kills(static_cast<uint32_t>(oom > e.oom_base ? oom - e.oom_base : 0));
    if (oom > e.oom_base) {
      Finish(e, v1::SANDBOX_OUTCOME_OOM, "the kernel killed a process at the memory limit of " +
                                             std::to_string(e.info.resources().memory_limit_bytes()) + " bytes");
    } else {
      Finish(e, v1::SANDBOX_OUTCOME_DESTROYED, "destroyed on request");
    }
    return EndedInfo(id);
  }

  Result<v1::SandboxInfo> Get(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end() && !it->second->pooled) return it->second->info;
    return EndedInfo(id);
  }

  std::vector<v1::SandboxInfo> List(bool include_ended) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<v1::SandboxInfo> out;
    for (auto& [id, e] : live_) {
      if (!e->pooled) out.push_back(e->info);
    }
    if (include_ended) {
      for (const auto& id : ended_order_) out.push_back(ended_.at(id));
    }
    return out;
  }

  v1::ProvisionerHealthResponse Health() override {
    std::lock_guard<std::mutex> lock(mu_);
    v1::ProvisionerHealthResponse h;
    h.set_ok(!stopping_);
    h.set_runtime("runc");
    for (auto& [id, e] : live_) {
      if (e->pooled) {
        h.set_warm(h.warm() + 1);
      } else {
        h.set_running(h.running() + 1);
      }
    }
    if (stopping_) h.set_detail("shutting down");
    return h;
  }

 private:
  Result<std::unique_ptr<Entry>> StartEntry(const v1::Resources& r, const std::string& shape) {
    std::string id = NewId();
    SINEW_ASSIGN_OR_RETURN(Container c, runner_.Start(id, r));
    auto e = std::make_unique<Entry>();
    e->container = c;
    e->shape = shape;
    e->oom_base = OomKills(config_.cgroup_parent, id);
    e->info.set_id(id);
    e->info.set_endpoint(c.endpoint);
    *e->info.mutable_resources() = r;
    e->info.set_state(v1::SANDBOX_STATE_READY);
    e->info.set_created_unix_ms(NowUnixMs());
    return e;
  }

  // REQUIRES: mu_ held.
  void HandOver(Entry& e, const std::string& label, Clock::time_point start, bool from_pool) {
    e.pooled = false;
    e.deadline = Clock::now() + std::chrono::seconds(e.info.resources().lifetime_seconds());
    e.info.set_from_warm_pool(from_pool);
    e.info.set_provision_ms(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    e.info.set_label(label);
  }

  // REQUIRES: mu_ held. Moves a live entry to the ended list.
  void Finish(Entry& e, v1::SandboxOutcome outcome, std::string detail) {
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
  void RememberEnded(const v1::SandboxInfo& info) {
    if (ended_.emplace(info.id(), info).second) ended_order_.push_back(info.id());
    while (ended_order_.size() > kEndedKept) {
      ended_.erase(ended_order_.front());
      ended_order_.pop_front();
    }
  }

  // REQUIRES: mu_ held.
  Result<v1::SandboxInfo> EndedInfo(const std::string& id) const {
    auto it = ended_.find(id);
    if (it == ended_.end()) return Status::NotFound("no sandbox with id '" + id + "'");
    return it->second;
  }

  // REQUIRES: mu_ held. Remembers a shape for the warm pools (most recent first).
  void NoteShape(const std::string& shape, const v1::Resources& r) {
    for (auto it = shapes_.begin(); it != shapes_.end(); ++it) {
      if (it->first == shape) {
        shapes_.erase(it);
        break;
      }
    }
    shapes_.emplace_front(shape, r);
    while (shapes_.size() > config_.max_warm_shapes) {
      for (const auto& id : pool_[shapes_.back().first]) {
        auto it = live_.find(id);
        if (it != live_.end()) it->second->deadline = Clock::time_point::min();  // the monitor ends it
      }
      pool_.erase(shapes_.back().first);
      shapes_.pop_back();
    }
  }

  void PoolLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      const v1::Resources* want = nullptr;
      std::string shape;
      for (const auto& [s, r] : shapes_) {
        if (pool_[s].size() < config_.warm_pool_size) {
          want = &r;
          shape = s;
          break;
        }
      }
      if (want == nullptr || live_.size() + starting_ >= config_.max_sandboxes) {
        pool_cv_.wait_for(lock, std::chrono::seconds(1));
        continue;
      }
      v1::Resources r = *want;
      ++starting_;
      lock.unlock();
      auto entry = StartEntry(r, shape);
      lock.lock();
      --starting_;
      if (!entry.ok()) {
        pool_cv_.wait_for(lock, std::chrono::seconds(1));  // e.g. the image vanished; retry later
        continue;
      }
      (*entry)->pooled = true;
      std::string id = (*entry)->info.id();
      live_[id] = std::move(*entry);
      pool_[shape].push_back(id);
    }
  }

  void MonitorLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      pool_cv_.wait_for(lock, kMonitorInterval, [&] { return stopping_; });
      if (stopping_) break;
      std::vector<std::pair<std::string, int>> exited;
      auto now = Clock::now();
      for (auto& [id, e] : live_) {
        if (e->ending) continue;
        int status = 0;
        if (waitpid(e->container.init_pid, &status, WNOHANG) == e->container.init_pid) {
          e->ending = true;
          exited.emplace_back(id, status);
          continue;
        }
        if (!e->oom && !e->lifetime && OomKills(config_.cgroup_parent, id) > e->oom_base) {
          e->oom = true;
          kill(e->container.init_pid, SIGKILL);
        } else if (!e->oom && !e->lifetime && now >= e->deadline) {
          e->lifetime = true;
          kill(e->container.init_pid, SIGKILL);
        }
      }
      if (exited.empty()) continue;
      lock.unlock();
      std::map<std::string, uint64_t> ooms;
      for (const auto& [id, status] : exited) {
        ooms[id] = OomKills(config_.cgroup_parent, id);
        runner_.Remove(id);
      }
      lock.lock();
      for (const auto& [id, status] : exited) {
        auto it = live_.find(id);
        if (it == live_.end()) continue;
        Entry& e = *it->second;
        uint64_t oom = ooms[id];
        e.info.set_oom_kills(static_cast<uint32_t>(oom > e.oom_base ? oom - e.oom_base : 0));
        if (e.oom || oom > e.oom_base) {
          Finish(e, v1::SANDBOX_OUTCOME_OOM, "the kernel killed a process at the memory limit of " +
                                                 std::to_string(e.info.resources().memory_limit_bytes()) +
                                                 " bytes; the sandbox was ended");
        } else if (e.lifetime) {
          Finish(e, v1::SANDBOX_OUTCOME_LIFETIME, "killed at its lifetime limit of " +
                                                      std::to_string(e.info.resources().lifetime_seconds()) + " s");
        } else if (WIFEXITED(status)) {
          e.info.set_exit_code(WEXITSTATUS(status));
          Finish(e, v1::SANDBOX_OUTCOME_EXITED, "the agent exited with status " + std::to_string(WEXITSTATUS(status)));
        } else {
          Finish(e, v1::SANDBOX_OUTCOME_LOST, "the agent was killed by signal " +
                                                  std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0));
        }
      }
    }
  }

  const ProvisionerConfig config_;
  ContainerRunner runner_;
  std::thread monitor_;
  std::thread pooler_;

  std::mutex mu_;
  std::condition_variable pool_cv_;   // pool or sandbox set changed, or stopping
  std::condition_variable ended_cv_;  // a sandbox ended
  bool stopping_ = false;                                       // guarded by mu_
  uint32_t starting_ = 0;                                       // guarded by mu_
  std::map<std::string, std::unique_ptr<Entry>> live_;          // guarded by mu_
  std::map<std::string, std::deque<std::string>> pool_;         // shape -> ids; guarded by mu_
  std::deque<std::pair<std::string, v1::Resources>> shapes_;    // warm shapes; guarded by mu_
  std::map<std::string, v1::SandboxInfo> ended_;                // guarded by mu_
  std::deque<std::string> ended_order_;                         // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<SandboxManager>> SandboxManager::Create(const ProvisionerConfig& config) {
  auto impl = std::make_unique<SandboxManagerImpl>(config);
  SINEW_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<SandboxManager>(std::move(impl));
}

}  // namespace sinew::sandbox
