#include "metered_store.h"

#include <chrono>
#include <string>

namespace sinew::store {
namespace {

constexpr const char* kWrites = "sinew_store_writes_total";
constexpr const char* kWriteSeconds = "sinew_store_write_seconds";
constexpr const char* kSyncWaits = "sinew_store_replication_sync_waits_total";
constexpr const char* kSyncTimeouts = "sinew_store_replication_sync_timeouts_total";
constexpr const char* kDegradedSwitches = "sinew_store_replication_degraded_switches_total";

const char* Outcome(const Status& status) {
  if (status.ok()) return "acknowledged";
  if (status.code() == StatusCode::kUnavailable) return "unavailable";
  return "refused";
}

}  // namespace

MeteredStore::MeteredStore(SessionStore* inner, Metrics* metrics,
                           std::function<std::shared_ptr<Primary>()> primary,
                           PrimaryOptions options)
    : inner_(inner), metrics_(metrics), primary_(std::move(primary)), options_(options) {}

void MeteredStore::Describe(Metrics* metrics) {
  metrics->Describe(
      kWrites, MetricType::kCounter,
      "Writes by call and outcome: acknowledged, refused (the request was wrong or fenced), "
      "unavailable (not the primary, or not replicated in time: retry with the same idempotency "
      "key)");
  metrics->Describe(kWriteSeconds, MetricType::kHistogram,
                    "Time to acknowledge a write, replication included, by call");
  metrics->Describe(kSyncWaits, MetricType::kCounter,
                    "Writes a primary in sync mode held until a follower had synced them");
  metrics->Describe(kSyncTimeouts, MetricType::kCounter,
                    "Of those, writes answered unavailable after waiting the follower timeout");
  metrics->Describe(kDegradedSwitches, MetricType::kCounter,
                    "Switches of a sync primary that may degrade: to async (no follower in sync) "
                    "and back to sync");
  metrics->Add(kSyncWaits, "", 0);
  metrics->Add(kSyncTimeouts, "", 0);
  metrics->Add(kDegradedSwitches, "to=\"async\"", 0);
  metrics->Add(kDegradedSwitches, "to=\"sync\"", 0);
}

bool MeteredStore::WaitedForFollower(bool replicated) {
  if (!replicated || options_.mode != ReplicationMode::kSync) return false;
  auto primary = primary_ ? primary_() : nullptr;
  return primary && !primary->Degraded();
}

void MeteredStore::NoteDegraded() {
  auto primary = primary_ ? primary_() : nullptr;
  if (!primary || !options_.degrade_when_alone) return;
  const bool now = primary->Degraded();
  if (now != degraded_.exchange(now)) metrics_->Add(kDegradedSwitches, now ? "to=\"async\"" : "to=\"sync\"");
}

void MeteredStore::Record(const char* op, const Status& status, double seconds, bool waited) {
  const std::string labels = std::string("op=\"") + op + "\"";
  metrics_->Add(kWrites, labels + ",outcome=\"" + Outcome(status) + "\"");
  if (status.ok()) metrics_->Observe(kWriteSeconds, labels, seconds);
  if (!waited) return;
  metrics_->Add(kSyncWaits, "");
  // A write refused before it waited (no longer the primary) answers at once; one that
  // waited the whole follower timeout is the primary's own refusal.
  const double timeout_s = std::chrono::duration<double>(options_.follower_timeout).count();
  if (status.code() == StatusCode::kUnavailable && seconds >= timeout_s)
    metrics_->Add(kSyncTimeouts, "");
}

template <typename T, typename Fn>
Result<T> MeteredStore::Write(const char* op, bool replicated, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  Result<T> out = fn();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NoteDegraded();
  Record(op, out.status(), seconds, WaitedForFollower(replicated));
  return out;
}

Result<v1::Session> MeteredStore::CreateSession(const v1::CreateSessionRequest& req) {
  return Write<v1::Session>("create_session", true, [&] { return inner_->CreateSession(req); });
}
Result<v1::Session> MeteredStore::SetStatus(const v1::SetStatusRequest& req) {
  return Write<v1::Session>("set_status", true, [&] { return inner_->SetStatus(req); });
}
Result<v1::AppendResponse> MeteredStore::Append(const v1::AppendRequest& req) {
  return Write<v1::AppendResponse>("append", true, [&] { return inner_->Append(req); });
}
Result<v1::Lease> MeteredStore::AcquireLease(const std::string& id, const LeaseHolder& holder,
                                             std::chrono::milliseconds ttl) {
  return Write<v1::Lease>("acquire_lease", true,
                          [&] { return inner_->AcquireLease(id, holder, ttl); });
}
Result<v1::Lease> MeteredStore::RenewLease(const std::string& id, const std::string& owner,
                                           uint64_t epoch, std::chrono::milliseconds ttl) {
  return Write<v1::Lease>("renew_lease", false,
                          [&] { return inner_->RenewLease(id, owner, epoch, ttl); });
}
Status MeteredStore::ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) {
  return Write<bool>("release_lease", true,
                     [&]() -> Result<bool> {
                       SINEW_RETURN_IF_ERROR(inner_->ReleaseLease(id, owner, epoch));
                       return true;
                     })
      .status();
}
Result<v1::AuditRecord> MeteredStore::AppendAudit(const v1::AppendAuditRequest& req) {
  return Write<v1::AuditRecord>("append_audit", true, [&] { return inner_->AppendAudit(req); });
}

}  // namespace sinew::store
