// Warm pools (PoolLoop, NoteShape) and the monitor that notices exits, OOM kills and
// lifetimes (MonitorLoop).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "sandboxd/host_setup.h"
#include "sandboxd/sandbox_manager_impl.h"

namespace sinew::sandbox {

// REQUIRES: mu_ held. Remembers a shape for the warm pools (most recent first).
void SandboxManagerImpl::NoteShape(const std::string& shape, const v1::Resources& r) {
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
      if (it != live_.end())
        it->second->deadline = Clock::time_point::min();  // the monitor ends it
    }
    pool_.erase(shapes_.back().first);
    shapes_.pop_back();
  }
}

void SandboxManagerImpl::PoolLoop() {
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
    auto entry = StartInSlot(lock, std::nullopt, r, shape, [] { return true; });
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

namespace {

// How the agent ended, from the wait status of the sandbox's init process (under gVisor,
// runsc's sandbox process, which exits with 128 + N when the agent is killed by signal N).
// A wait status no process has (its exit status was lost).
constexpr int kStatusLost = -1;

std::string HowTheAgentEnded(int status, bool gvisor) {
  if (status == kStatusLost) return "its exit status was lost";
  int signal = 0;
  if (WIFSIGNALED(status)) {
    signal = WTERMSIG(status);
  } else if (gvisor && WIFEXITED(status) && WEXITSTATUS(status) > 128) {
    signal = WEXITSTATUS(status) - 128;
  }
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace

void SandboxManagerImpl::MonitorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (uint64_t tick = 0; !stopping_; ++tick) {
    pool_cv_.wait_for(lock, kMonitorInterval, [&] { return stopping_; });
    if (stopping_) break;
    // About once a second: runsc's processes that outlived their sandbox and were
    // re-parented here (this daemon is the subreaper), such as the ptrace platform's stub
    // processes, which die with the sentry. Their command name is runsc's re-executed
    // "exe"; a live sandbox's own init (also "exe" under runsc) is left to the loop below.
    if (tick % 20 == 0) {
      std::set<pid_t> inits;
      for (const auto& [id, e] : live_) inits.insert(e->container.init_pid);
      for (pid_t pid : ZombieChildren("exe")) {
        int status = 0;
        if (inits.count(pid) == 0) waitpid(pid, &status, WNOHANG);
      }
    }
    std::vector<std::pair<std::string, int>> exited;
    auto now = Clock::now();
    for (auto& [id, e] : live_) {
      // Busy: frozen for a snapshot or being paused; its owner thread holds the entry and
      // clears the flag (or ends it) before anything else may touch it.
      if (e->ending || e->busy) continue;
      int status = 0;
      const pid_t waited = waitpid(e->container.init_pid, &status, WNOHANG);
      if (waited == e->container.init_pid || (waited < 0 && errno == ECHILD)) {
        // ECHILD: reaped elsewhere (by the sweep above while it started): status unknown.
        e->ending = true;
        exited.emplace_back(id, waited < 0 ? kStatusLost : status);
        continue;
      }
      if (e->oom || e->lifetime || e->unclaimed) continue;  // killed, waiting for its exit
      if (OomKills(config_.cgroup_parent, id) > e->oom_base) {
        e->oom = true;
        kill(e->container.init_pid, SIGKILL);
      } else if (now >= e->deadline) {
        e->lifetime = true;
        kill(e->container.init_pid, SIGKILL);
      } else if (now >= e->claim_deadline) {
        e->unclaimed = true;
        kill(e->container.init_pid, SIGKILL);
      }
    }
    if (exited.empty()) continue;
    lock.unlock();
    std::map<std::string, uint64_t> ooms;
    std::map<std::string, CgroupUsage> usages;
    std::map<std::string, std::string> panics;
    std::map<std::string, bool> over_budget;
    for (const auto& [id, status] : exited) {
      ooms[id] = OomKills(config_.cgroup_parent, id);
      over_budget[id] = RefusedByParentPidsLimit(config_.cgroup_parent, id);
      panics[id] = runner_.SentryPanic(id);
      usages[id] = ReadCgroupUsage(config_.cgroup_parent, id);
      runner_.Remove(id);
    }
    lock.lock();
    for (const auto& [id, status] : exited) {
      auto it = live_.find(id);
      if (it == live_.end()) continue;
      LiveSandbox& e = *it->second;
      uint64_t oom = ooms[id];
      SetUsage(e.info, usages[id]);
      e.info.set_oom_kills(static_cast<uint32_t>(oom > e.oom_base ? oom - e.oom_base : 0));
      if (e.oom || oom > e.oom_base) {
        Finish(e, v1::SANDBOX_OUTCOME_OOM,
               "the kernel killed a process at the memory limit of " +
                   std::to_string(e.info.resources().memory_limit_bytes()) +
                   " bytes; the sandbox was ended");
      } else if (e.lifetime) {
        Finish(e, v1::SANDBOX_OUTCOME_LIFETIME,
               "killed at its lifetime limit of " +
                   std::to_string(e.info.resources().lifetime_seconds()) + " s");
      } else if (e.unclaimed) {
        e.info.set_awaiting_claim(false);
        Finish(e, v1::SANDBOX_OUTCOME_UNCLAIMED,
               "handed over, but its caller did not claim it in time (the answer was lost or "
               "came too late); it was ended");
      } else if (over_budget[id] && !panics[id].empty()) {
        // gVisor's sentry panics when the host refuses it a thread; here the refusal came
        // from the budget of all sandboxes together, not from this sandbox's own ceiling.
        Finish(e, v1::SANDBOX_OUTCOME_LOST,
               "the host task budget of all sandboxes (" + std::to_string(host_pids_budget_) +
                   ", --host-pids-budget) was reached and gVisor's sentry could not make a "
                   "thread; the sandbox was ended (sentry: " + panics[id] + ")");
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        e.info.set_exit_code(0);
        Finish(e, v1::SANDBOX_OUTCOME_EXITED, "the agent exited with status 0 (it was told to stop)");
      } else {
        if (WIFEXITED(status)) e.info.set_exit_code(WEXITSTATUS(status));
        Finish(e, v1::SANDBOX_OUTCOME_LOST,
               "the agent died (" + HowTheAgentEnded(status, e.info.resources().runtime() == "runsc") +
                   "); the sandbox was ended" +
                   (panics[id].empty() ? "" : " (gVisor's sentry: " + panics[id] + ")"));
      }
    }
  }
}

}  // namespace sinew::sandbox
