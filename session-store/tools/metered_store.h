// MeteredStore: the SessionStore that sinew-store serves, counting every write into the
// process's Metrics (docs/session-store.md, "Metrics"): per call, how many were
// acknowledged, refused or answered `unavailable` and how long the acknowledged ones took;
// on a primary in sync mode, how many waited for a follower, how many of those timed out
// (answered `unavailable` after the follower timeout), and the switches to and from
// degraded (acknowledged with no follower connected, --when-no-follower degrade).
//
// Thread-safety: as the wrapped store; the counters are the Metrics' own.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "sinew/metrics.h"
#include "sinew/session_store/replication.h"
#include "sinew/session_store/session_store.h"

namespace sinew::store {

class MeteredStore final : public SessionStore {
 public:
  // `primary` gives the Primary of the moment, null while this process does not lead (or
  // is not replicated); `options` are the ones it was opened with. `inner` and `metrics`
  // must outlive this object.
  MeteredStore(SessionStore* inner, Metrics* metrics,
               std::function<std::shared_ptr<Primary>()> primary, PrimaryOptions options);

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override;
  Result<v1::Session> GetSession(const std::string& id) override { return inner_->GetSession(id); }
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override {
    return inner_->ListSessions(req);
  }
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override;
  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override;
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return inner_->GetEvents(req);
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    return inner_->ReadEventBytes(req);
  }
  Result<std::unique_ptr<EventWatcher>> Watch(const std::string& id, uint64_t from_seq) override {
    return inner_->Watch(id, from_seq);
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override;
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override;
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override;
  Status Checkpoint(const std::string& target_dir) override {
    return inner_->Checkpoint(target_dir);
  }
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override;
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override {
    return inner_->ListAudit(req);
  }

  // Declares the families this class writes (so that a scrape shows them at 0).
  static void Describe(Metrics* metrics);

 private:
  // Runs one write `fn` named `op`; `replicated`: a primary in sync mode waits for a
  // follower before acknowledging it (every write but a lease renewal).
  template <typename T, typename Fn>
  Result<T> Write(const char* op, bool replicated, Fn&& fn);
  // Whether the write just made waited for a follower: a sync primary's that did not
  // leave it degraded.
  bool WaitedForFollower(bool replicated);
  // Counts the primary's switch to or from degraded, if the last write made one.
  void NoteDegraded();
  void Record(const char* op, const Status& status, double seconds, bool waited);

  SessionStore* inner_;
  Metrics* metrics_;
  const std::function<std::shared_ptr<Primary>()> primary_;
  const PrimaryOptions options_;
  std::atomic<bool> degraded_{false};  // the primary's Degraded() after the last write
};

}  // namespace sinew::store
