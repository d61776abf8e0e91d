// ReplicaRouter: picks which replica of a model (several sinew-model or other
// OpenAI-compatible or Anthropic servers serving the same weights) takes a session's next call.
//
// The rule (docs/scale-out.md, "Model replicas"):
//   - Each session has a home replica: consistent hashing of the session id on a ring of
//     kVirtualNodes points per replica (a stable FNV-1a hash, so every harness replica
//     agrees). A session's calls go home while it is up and not overloaded, so the
//     server's prefix cache holds the session's conversation. Adding or removing one of
//     N replicas moves only about 1/N of the sessions.
//   - Bounded load (consistent hashing with bounded loads, Mirrokni et al. 2018; SGLang's
//     router likewise balances only past an absolute and a relative threshold): no
//     replica takes more than max(min_in_flight, ceil(load_factor * (calls in flight + 1)
//     / replicas up)) calls at once; past that the call goes to the next replica
//     clockwise on the ring that is under the bound.
//   - A replica whose call failed at the transport or with a 5xx is down for a while
//     (1 s, doubling per consecutive failure up to 30 s); calls skip it, and the first
//     call after that time probes it. A success brings it back at once. When every
//     replica is down the call goes home anyway (a probe).
//   - Active health checks (ReplicaRouting's prober, every replica_health_check_ms):
//     a failed check (transport error, 5xx, 429) counts like a failed call, so a dead or
//     loading replica is skipped before any session's call finds it; a passing check
//     brings it back at once, before any call probes it.
//
// Thread-safety: all methods may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sinew::harness {

struct ReplicaRouterOptions {
  double load_factor = 1.25;  // >= 1
  // Calls in flight a replica always takes before the bound applies: at low load the
  // bound (ceil(1.25 * 2 / 3) = 1 for two calls on three replicas) would scatter
  // sessions whose home is merely busy, and lose their prefix cache for nothing.
  uint32_t min_in_flight = 4;
  // Plain round robin over the replicas that are up, ignoring homes and the bound: the
  // baseline the session rule is measured against (harness/bench/replica_routing.py).
  bool round_robin = false;
  std::chrono::milliseconds first_down{1000};
  std::chrono::milliseconds max_down{30000};
  // The time source (tests set their own). Default: std::chrono::steady_clock::now
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class ReplicaRouter {
 public:
  static constexpr uint32_t kVirtualNodes = 64;
  using Clock = std::chrono::steady_clock;

  using Options = ReplicaRouterOptions;

  // Why a call went where it did.
  enum class Choice { kHome, kOverloaded, kDown, kAllDown };

  // One call in flight on a replica; finishing it (or destroying it) frees the slot.
  class Call {
   public:
    Call(Call&& other) noexcept;
    Call& operator=(Call&&) = delete;
    ~Call();
    const std::string& url() const { return url_; }
    size_t replica() const { return replica_; }
    Choice choice() const { return choice_; }
    // The replica answered (any HTTP status below 500): it is up.
    void Succeeded();
    // Transport error or HTTP 5xx: down for a while.
    void Failed();

   private:
    friend class ReplicaRouter;
    Call(ReplicaRouter* router, size_t replica, std::string url, Choice choice)
        : router_(router), replica_(replica), url_(std::move(url)), choice_(choice) {}
    void Finish(bool ok);
    ReplicaRouter* router_;
    size_t replica_;
    std::string url_;
    Choice choice_;
    bool done_ = false;
  };

  struct ReplicaState {
    std::string url;
    bool up = true;  // its last call did not fail (a failed one stays down until a probe succeeds)
    uint32_t in_flight = 0;
    uint64_t calls = 0;
    uint64_t failures = 0;  // calls that failed (failed health checks are counted apart)
    uint64_t moved_in = 0;  // calls it took for another home (overload or a down home)
    uint64_t health_checks = 0;
    uint64_t health_check_failures = 0;
  };

  // `urls` must be non-empty and distinct (config parsing checks).
  explicit ReplicaRouter(std::vector<std::string> urls, Options options = {});

  // The replica for a call of session `key`, counted in flight until the Call ends.
  Call Pick(std::string_view key);
  // The outcome of an active health check of replica `replica` (an index of `urls`):
  // failed like a failed call (down for a while), passed like a successful one (up).
  void HealthChecked(size_t replica, bool ok);
  // The replica `key` goes to when all are up and idle.
  size_t HomeOf(std::string_view key) const;
  std::vector<ReplicaState> Snapshot() const;
  // The snapshot in the Prometheus text format, labelled model="<model>" and
  // replica="<url>": sinew_harness_model_replica_up, _in_flight, _calls_total,
  // _failures_total, _moved_in_total, _health_checks_total, _health_check_failures_total.
  std::string MetricsText(std::string_view model) const;

 private:
  struct Replica {
    ReplicaState state;
    uint32_t consecutive_failures = 0;
    Clock::time_point down_until{};
  };
  // Distinct replicas in ring order from the key's point.
  std::vector<size_t> RingOrder(uint64_t point) const;
  void Release(size_t replica, bool ok);
  // Records a call's or a check's outcome. Requires mu_.
  void RecordLocked(Replica& r, bool ok);
  Clock::time_point Now() const { return options_.clock ? options_.clock() : Clock::now(); }

  const Options options_;
  std::vector<std::pair<uint64_t, size_t>> ring_;  // (point, replica), sorted; constant
  mutable std::mutex mu_;
  std::vector<Replica> replicas_;  // guarded by mu_
  size_t next_ = 0;                // round robin position; guarded by mu_
};

}  // namespace sinew::harness
