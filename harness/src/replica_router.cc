#include "replica_router.h"

#include <algorithm>
#include <cmath>

namespace sinew::harness {
namespace {

// FNV-1a, 64 bits, then a splitmix finaliser to spread nearby inputs over the ring.
// Stable across processes and builds, so that every harness maps a session alike.
uint64_t StableHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

}  // namespace

ReplicaRouter::ReplicaRouter(std::vector<std::string> urls, Options options) : options_(options) {
  replicas_.resize(urls.size());
  for (size_t i = 0; i < urls.size(); ++i) {
    replicas_[i].state.url = urls[i];
    for (uint32_t v = 0; v < kVirtualNodes; ++v) {
      ring_.emplace_back(StableHash(urls[i] + "#" + std::to_string(v)), i);
    }
  }
  std::sort(ring_.begin(), ring_.end());
}

std::vector<size_t> ReplicaRouter::RingOrder(uint64_t point) const {
  std::vector<size_t> order;
  order.reserve(replicas_.size());
  std::vector<bool> seen(replicas_.size(), false);
  auto it = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(point, size_t{0}));
  for (size_t n = 0; n < ring_.size() && order.size() < replicas_.size(); ++n, ++it) {
    if (it == ring_.end()) it = ring_.begin();
    if (!seen[it->second]) {
      seen[it->second] = true;
      order.push_back(it->second);
    }
  }
  return order;
}

size_t ReplicaRouter::HomeOf(std::string_view key) const { return RingOrder(StableHash(key)).front(); }

ReplicaRouter::Call ReplicaRouter::Pick(std::string_view key) {
  const std::vector<size_t> order = RingOrder(StableHash(key));
  const auto now = Now();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t in_flight = 0;
  size_t up = 0;
  for (const Replica& r : replicas_) {
    in_flight += r.state.in_flight;
    if (r.down_until <= now) ++up;
  }
  size_t chosen = order.front();
  Choice choice = Choice::kAllDown;
  if (options_.round_robin && up > 0) {
    for (size_t n = 0; n < replicas_.size(); ++n) {
      const size_t i = next_++ % replicas_.size();
      if (replicas_[i].down_until > now) continue;
      chosen = i;
      choice = Choice::kHome;  // no homes: nothing counts as moved
      break;
    }
  } else if (up > 0) {
    const auto bound = std::max(
        options_.min_in_flight,
        static_cast<uint32_t>(std::ceil(options_.load_factor * static_cast<double>(in_flight + 1) /
                                        static_cast<double>(up))));
    bool home_down = false;
    for (size_t i = 0; i < order.size(); ++i) {
      const Replica& r = replicas_[order[i]];
      if (r.down_until > now) {
        if (i == 0) home_down = true;
        continue;
      }
      if (r.state.in_flight >= bound) continue;
      chosen = order[i];
      choice = i == 0 ? Choice::kHome : (home_down ? Choice::kDown : Choice::kOverloaded);
      break;
    }
  }
  Replica& r = replicas_[chosen];
  ++r.state.in_flight;
  ++r.state.calls;
  if (choice == Choice::kOverloaded || choice == Choice::kDown) ++r.state.moved_in;
  return Call(this, chosen, r.state.url, choice);
}

void ReplicaRouter::Release(size_t replica, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  Replica& r = replicas_[replica];
  --r.state.in_flight;
  if (!ok) ++r.state.failures;
  RecordLocked(r, ok);
}

void ReplicaRouter::HealthChecked(size_t replica, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  Replica& r = replicas_[replica];
  ++r.state.health_checks;
  if (!ok) ++r.state.health_check_failures;
  RecordLocked(r, ok);
}

void ReplicaRouter::RecordLocked(Replica& r, bool ok) {
  if (ok) {
    r.consecutive_failures = 0;
    r.down_until = {};
    return;
  }
  ++r.consecutive_failures;
  auto down = options_.first_down * (1ll << std::min<uint32_t>(r.consecutive_failures - 1, 20));
  r.down_until = Now() + std::min<std::chrono::milliseconds>(down, options_.max_down);
}

std::vector<ReplicaRouter::ReplicaState> ReplicaRouter::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ReplicaState> out;
  out.reserve(replicas_.size());
  for (const Replica& r : replicas_) {
    out.push_back(r.state);
    out.back().up = r.consecutive_failures == 0;
  }
  return out;
}

std::string ReplicaRouter::MetricsText(std::string_view model) const {
  std::string out;
  const std::vector<ReplicaState> replicas = Snapshot();
  auto family = [&](const char* name, const char* type, auto value) {
    out += std::string("# TYPE ") + name + " " + type + "\n";
    for (const auto& r : replicas) {
      out += std::string(name) + "{model=\"" + std::string(model) + "\",replica=\"" + r.url + "\"} " +
             std::to_string(value(r)) + "\n";
    }
  };
  family("sinew_harness_model_replica_up", "gauge", [](const ReplicaState& r) { return r.up ? 1 : 0; });
  family("sinew_harness_model_replica_in_flight", "gauge", [](const ReplicaState& r) { return r.in_flight; });
  family("sinew_harness_model_replica_calls_total", "counter", [](const ReplicaState& r) { return r.calls; });
  family("sinew_harness_model_replica_failures_total", "counter", [](const ReplicaState& r) { return r.failures; });
  family("sinew_harness_model_replica_moved_in_total", "counter", [](const ReplicaState& r) { return r.moved_in; });
  family("sinew_harness_model_replica_health_checks_total", "counter",
         [](const ReplicaState& r) { return r.health_checks; });
  family("sinew_harness_model_replica_health_check_failures_total", "counter",
         [](const ReplicaState& r) { return r.health_check_failures; });
  return out;
}

ReplicaRouter::Call::Call(Call&& other) noexcept
    : router_(other.router_), replica_(other.replica_), url_(std::move(other.url_)),
      choice_(other.choice_), done_(other.done_) {
  other.done_ = true;
}

ReplicaRouter::Call::~Call() {
  // Abandoned without an answer (the caller was cancelled): frees the slot, says nothing
  // about the replica's health.
  if (!done_) {
    done_ = true;
    std::lock_guard<std::mutex> lock(router_->mu_);
    --router_->replicas_[replica_].state.in_flight;
  }
}

void ReplicaRouter::Call::Finish(bool ok) {
  if (done_) return;
  done_ = true;
  router_->Release(replica_, ok);
}

void ReplicaRouter::Call::Succeeded() { Finish(true); }
void ReplicaRouter::Call::Failed() { Finish(false); }

}  // namespace sinew::harness
