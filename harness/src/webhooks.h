// Webhooks (docs/harness.md, "Webhooks"): what the store keeps about them, and how a
// session event becomes a webhook.
//
// Everything lives in the session store, in audit logs apart from every tenant's
// (SessionStore::AppendAudit / ListAudit under internal log names no tenant can have):
//   - the endpoint registry: one record per endpoint created and one per endpoint deleted;
//   - the outbox: one record (session, seq) per event that may be sent, written before
//     the event is appended to its session (WebhookOutboxStore);
//   - a delivery log per endpoint: one record per attempt (its outcome, and when the next
//     one is due).
// The harness that holds the lease of kWebhookLeaseSession sends (WebhookDeliverer).
//
// Thread-safety: the functions may be called from any thread; WebhookState's members are
// atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "sinew/harness/config.h"
#include "sinew/session_store/session_store.h"
#include "webhook_url.h"

namespace sinew::harness {

// The event types an endpoint may ask for. A status change to requires_action is
// "session.requires_action" (an endpoint asking for "session.status_changed" gets it too).
inline constexpr const char* kWebhookStatusChanged = "session.status_changed";
inline constexpr const char* kWebhookRequiresAction = "session.requires_action";
inline constexpr const char* kWebhookError = "session.error";
bool IsWebhookEventType(const std::string& type);

// The session whose lease makes a harness the one that sends (a record, never driven).
inline constexpr const char* kWebhookLeaseSession = "000000000000000000000000000000e1";

struct WebhookEndpoint {
  std::string id;  // 32 lower-case hex digits
  std::string tenant;
  std::string url;
  std::vector<std::string> events;  // empty: every type
  std::string description;
  std::string secret;  // "whsec_..."
  int64_t created_unix_ms = 0;
  bool deleted = false;
};

// The webhook type of a session event ("" when it is not sent).
std::string WebhookTypeOf(const v1::Event& event);
// True when `endpoint` asks for `type`.
bool WebhookWants(const WebhookEndpoint& endpoint, const std::string& type);
// The id a receiver deduplicates by: the same for every attempt and every endpoint.
std::string WebhookEventId(const std::string& session_id, uint64_t seq);
// The body sent for `event` of a session of `tenant`.
std::string WebhookBody(const v1::Event& event, const std::string& tenant, const std::string& type);
// The endpoint as the API shows it (never its secret).
boost::json::object WebhookEndpointJson(const WebhookEndpoint& endpoint);
// Where the config lets `tenant`'s webhooks go.
WebhookUrlPolicy WebhookPolicyOf(const HarnessConfig& config, const std::string& tenant);

// The registry, replayed: every endpoint ever created (deleted ones marked), by id.
// `after` continues from a record id ("" from the start) and is set to the last one read.
[[nodiscard]] Status ReadWebhookEndpoints(store::SessionStore* store,
                                          std::map<std::string, WebhookEndpoint>* out,
                                          std::string* after);
[[nodiscard]] Status RecordWebhookCreated(store::SessionStore* store,
                                          const WebhookEndpoint& endpoint);
[[nodiscard]] Status RecordWebhookDeleted(store::SessionStore* store,
                                          const WebhookEndpoint& endpoint);

// An outbox record: event `seq` of `session_id` may be a webhook.
struct WebhookIntent {
  std::string session_id;
  uint64_t seq = 0;
  int64_t recorded_unix_ms = 0;
};
[[nodiscard]] Status RecordWebhookIntent(store::SessionStore* store, const std::string& session_id,
                                         uint64_t seq);
// Outbox records after record id `*after` ("" from the start); sets *after to the last read.
[[nodiscard]] Result<std::vector<WebhookIntent>> ReadWebhookIntents(store::SessionStore* store,
                                                                    std::string* after);

// One attempt to deliver an event to an endpoint.
struct WebhookAttempt {
  std::string event_id;
  std::string type;
  std::string session_id;
  uint64_t seq = 0;
  uint32_t attempt = 0;  // 1, 2, ...
  int64_t time_unix_ms = 0;
  int64_t event_unix_ms = 0;
  int status_code = 0;  // 0: no HTTP answer
  std::string error;
  std::string outcome;  // "delivered", "retrying" or "failed" (the last two: not delivered)
  int64_t next_attempt_unix_ms = 0;  // outcome "retrying"
};
[[nodiscard]] Status RecordWebhookAttempt(store::SessionStore* store,
                                          const std::string& endpoint_id,
                                          const WebhookAttempt& attempt);
// Every attempt to `endpoint_id`, oldest first.
[[nodiscard]] Result<std::vector<WebhookAttempt>> ReadWebhookAttempts(
    store::SessionStore* store, const std::string& endpoint_id);
// The delivery log as the API shows it: one entry per event, newest first, with its
// attempts, state and last answer.
boost::json::array WebhookDeliveriesJson(const std::vector<WebhookAttempt>& attempts);

// Shared by the outbox writer, the deliverer and the API of one harness.
struct WebhookState {
  // Whether some endpoint exists (so that outbox records are worth writing). True until
  // the registry was first read.
  std::atomic<bool> any_endpoint{true};
};

}  // namespace sinew::harness
