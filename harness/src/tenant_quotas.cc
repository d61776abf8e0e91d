// TenantQuotas: token buckets, a sliding minute of model tokens and sandbox holders.
#include "tenant_quotas.h"

#include <algorithm>
#include <cmath>

namespace sinew::harness {
namespace {

constexpr auto kWindow = std::chrono::seconds(60);

uint32_t CeilSeconds(double seconds) {
  return static_cast<uint32_t>(std::max(1.0, std::ceil(seconds - 1e-9)));
}

}  // namespace

TenantQuotas::TenantQuotas(std::map<std::string, TenantQuotaConfig> quotas, Clock clock)
    : quotas_(std::move(quotas)),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}

const TenantQuotaConfig& TenantQuotas::QuotaOf(const std::string& tenant) const {
  auto it = quotas_.find(tenant);
  return it == quotas_.end() ? unlimited_ : it->second;
}

std::optional<uint32_t> TenantQuotas::TakeRequest(const std::string& tenant) {
  const double rate = QuotaOf(tenant).requests_per_second;
  if (rate <= 0) return std::nullopt;
  const double capacity = std::max(1.0, rate);
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mutex_);
  Bucket& b = buckets_[tenant];
  if (!b.started) {
    b.started = true;
    b.tokens = capacity;
  } else {
    const double elapsed = std::chrono::duration<double>(now - b.refilled).count();
    b.tokens = std::min(capacity, b.tokens + std::max(0.0, elapsed) * rate);
  }
  b.refilled = now;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return std::nullopt;
  }
  return CeilSeconds((1.0 - b.tokens) / rate);
}

void TenantQuotas::Prune(std::deque<Usage>* window,
                         std::chrono::steady_clock::time_point now) const {
  while (!window->empty() && now - window->front().at >= kWindow) window->pop_front();
}

uint64_t TenantQuotas::PrunedSum(std::deque<Usage>* window,
                                 std::chrono::steady_clock::time_point now) const {
  Prune(window, now);
  uint64_t sum = 0;
  for (const auto& u : *window) sum += u.tokens;
  return sum;
}

void TenantQuotas::AddTokens(const std::string& tenant, uint64_t tokens) {
  if (tokens == 0) return;
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& window = usage_[tenant];
  Prune(&window, now);
  window.push_back(Usage{now, tokens});
}

uint64_t TenantQuotas::TokensInLastMinute(const std::string& tenant) {
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mutex_);
  return PrunedSum(&usage_[tenant], now);
}

std::optional<uint32_t> TenantQuotas::TokensRetryAfter(const std::string& tenant) {
  const uint64_t limit = QuotaOf(tenant).tokens_per_minute;
  if (limit == 0) return std::nullopt;
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& window = usage_[tenant];
  uint64_t sum = PrunedSum(&window, now);
  if (sum < limit) return std::nullopt;
  // The oldest entries age out first: find the one whose leaving brings the sum under.
  for (const auto& u : window) {
    sum -= u.tokens;
    if (sum < limit) {
      return CeilSeconds(std::chrono::duration<double>(u.at + kWindow - now).count());
    }
  }
  return 60;  // not reached: the sum of an emptied window is 0
}

bool TenantQuotas::AcquireSandbox(const std::string& tenant, const std::string& session_id,
                                  bool force) {
  const uint32_t limit = QuotaOf(tenant).max_sandboxes;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& held = boxes_[tenant];
  if (held.count(session_id)) return true;
  if (!force && limit > 0 && held.size() >= limit) return false;
  held.insert(session_id);
  return true;
}

void TenantQuotas::ReleaseSandbox(const std::string& tenant, const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = boxes_.find(tenant);
  if (it != boxes_.end()) it->second.erase(session_id);
}

size_t TenantQuotas::SandboxesHeld(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = boxes_.find(tenant);
  return it == boxes_.end() ? 0 : it->second.size();
}

}  // namespace sinew::harness
