// WebhookDeliverer: sends the webhooks of the outbox (docs/harness.md, "Webhooks") from
// one harness at a time, the holder of kWebhookLeaseSession's lease.
//
// Each pass (config.webhooks.poll_ms) it renews or takes the lease, reads the new
// endpoint and outbox records, turns each outbox entry whose event is in its session's
// log into one delivery per endpoint of the session's tenant that wants its type, and
// sends what is due, one at a time, each attempt recorded in the endpoint's delivery log.
// A failed attempt (no answer, or a status outside 2xx) is tried again after
// retry_initial_ms, doubling up to retry_max_ms, until retry_for_seconds after the
// event; then the delivery is failed. A harness that takes the lease over (at a new
// epoch) rebuilds everything from the store: what its predecessor sent without recording
// is sent again, with the same webhook-id (at least once).
//
// Thread-safety: Start and Stop from one thread; the work runs on a thread of its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sinew/harness/config.h"
#include "sinew/session_store/session_store.h"
#include "webhooks.h"

namespace sinew::harness {

class WebhookDeliverer {
 public:
  // Not owned; all outlive the deliverer.
  WebhookDeliverer(const HarnessConfig* config, store::SessionStore* store, WebhookState* state);
  ~WebhookDeliverer();
  // Starts the thread; `owner` and `url` name this harness in the lease.
  void Start(const std::string& owner, const std::string& url);
  // Ends the thread (a send under way is stopped) and releases the lease.
  void Stop();

 private:
  struct Delivery {
    std::string endpoint_id;
    std::string event_id;
    std::string type;
    std::string session_id;
    uint64_t seq = 0;
    std::string body;
    int64_t event_unix_ms = 0;
    uint32_t attempts = 0;  // made so far (recorded)
    int64_t next_unix_ms = 0;
  };
  struct Pending {  // an outbox entry whose event is not in its log yet
    WebhookIntent intent;
    int64_t next_check_unix_ms = 0;
    uint32_t checks = 0;
  };

  void Loop();
  bool HoldLease();
  void Reset();
  bool ReadRecords();
  void LoadAttempts(const std::string& endpoint_id);
  void Resolve(int64_t now);
  // False when the entry must wait (its event is not written yet).
  bool ResolveOne(const WebhookIntent& intent);
  void SendDue();
  void Send(Delivery* d);
  int64_t Backoff(uint32_t attempts) const;
  bool Sleep(std::chrono::milliseconds ms);

  const HarnessConfig* const config_;
  store::SessionStore* const store_;
  WebhookState* const state_;
  std::string owner_, url_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;

  // The work thread's own, rebuilt at each new lease epoch.
  uint64_t epoch_ = 0;
  bool held_ = false;
  std::chrono::steady_clock::time_point renewed_;
  std::string registry_after_, outbox_after_;
  int64_t registry_read_unix_ms_ = 0;  // when the last registry read began
  std::map<std::string, WebhookEndpoint> endpoints_;
  std::set<std::string> attempts_loaded_;  // endpoints whose delivery log was read
  // endpoint id -> event id -> (attempts recorded, last attempt time, final)
  struct Recorded {
    uint32_t attempts = 0;
    int64_t last_unix_ms = 0;
    bool final = false;
  };
  std::map<std::string, std::map<std::string, Recorded>> recorded_;
  std::set<std::string> resolved_events_;
  std::vector<Pending> pending_;
  std::map<std::string, std::string> tenant_of_;  // session id -> tenant
  std::map<std::pair<std::string, std::string>, Delivery>
      deliveries_;  // (endpoint, event) -> to send
};

}  // namespace sinew::harness
