// TenantQuotas: the per-tenant limits of config.tenants (docs/security.md, "Tenant
// quotas") as soft state in this process.
//
//  - requests_per_second: a token bucket per tenant holding at most one second's worth of
//    requests (at least 1); each authenticated /v1/sessions request takes one.
//  - tokens_per_minute: the model tokens (prompt + completion) the tenant's sessions used
//    in the last 60 s, as recorded by this process.
//  - max_sandboxes: sessions of the tenant that hold a sandbox through this process.
//  - max_concurrent_sessions is counted in the store (see ApiHandler), not here.
//
// Nothing here is persisted: a restarted harness starts with full buckets and an empty
// minute, and each harness replica enforces its own share (docs/security.md).
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "sinew/harness/config.h"

namespace sinew::harness {

class TenantQuotas {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `clock` defaults to std::chrono::steady_clock::now (tests pass their own).
  explicit TenantQuotas(std::map<std::string, TenantQuotaConfig> quotas, Clock clock = nullptr);

  const TenantQuotaConfig& QuotaOf(const std::string& tenant) const;

  // Takes one request from the tenant's bucket. nullopt: allowed; otherwise refused, and
  // the value is the seconds (rounded up, at least 1) until a request is allowed again.
  std::optional<uint32_t> TakeRequest(const std::string& tenant);

  // Records model tokens the tenant used now.
  void AddTokens(const std::string& tenant, uint64_t tokens);
  // The tokens the tenant used in the last 60 s.
  uint64_t TokensInLastMinute(const std::string& tenant);
  // nullopt while the tenant is under tokens_per_minute; otherwise the seconds (rounded
  // up, at least 1) until enough of the last minute's tokens age out to be under it.
  std::optional<uint32_t> TokensRetryAfter(const std::string& tenant);

  // Counts `session_id` among the tenant's sandbox holders. False (nothing counted) when
  // that would exceed max_sandboxes; a session already counted is always allowed, and
  // `force` counts it regardless (a session that already holds one when it is resumed).
  bool AcquireSandbox(const std::string& tenant, const std::string& session_id, bool force = false);
  void ReleaseSandbox(const std::string& tenant, const std::string& session_id);
  size_t SandboxesHeld(const std::string& tenant);

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point refilled;
    bool started = false;
  };
  struct Usage {
    std::chrono::steady_clock::time_point at;
    uint64_t tokens = 0;
  };
  void Prune(std::deque<Usage>* window, std::chrono::steady_clock::time_point now) const;
  // Prunes `window`, then returns its tokens.
  uint64_t PrunedSum(std::deque<Usage>* window, std::chrono::steady_clock::time_point now) const;

  const std::map<std::string, TenantQuotaConfig> quotas_;
  const TenantQuotaConfig unlimited_;
  const Clock clock_;
  std::mutex mutex_;
  std::map<std::string, Bucket> buckets_;               // guarded by mutex_
  std::map<std::string, std::deque<Usage>> usage_;      // guarded by mutex_
  std::map<std::string, std::set<std::string>> boxes_;  // guarded by mutex_
};

}  // namespace sinew::harness
