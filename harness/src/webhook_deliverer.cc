#include "webhook_deliverer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "json_util.h"
#include "outgoing_http.h"
#include "webhook_signature.h"

namespace sinew::harness {
namespace {

constexpr int64_t kRegistryMarginMs = 500;

}  // namespace

WebhookDeliverer::WebhookDeliverer(const HarnessConfig* config, store::SessionStore* store,
                                   WebhookState* state)
    : config_(config), store_(store), state_(state) {}

WebhookDeliverer::~WebhookDeliverer() { Stop(); }

void WebhookDeliverer::Start(const std::string& owner, const std::string& url) {
  owner_ = owner;
  url_ = url;
  thread_ = std::thread([this] { Loop(); });
}

void WebhookDeliverer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.exchange(true)) return;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Another harness takes over at once, not after the ttl.
  if (held_) (void)store_->ReleaseLease(kWebhookLeaseSession, owner_, epoch_);
}

bool WebhookDeliverer::Sleep(std::chrono::milliseconds ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, ms, [&] { return stopping_.load(); });
  return !stopping_.load();
}

void WebhookDeliverer::Loop() {
  const auto poll = std::chrono::milliseconds(config_->webhooks.poll_ms);
  while (Sleep(poll)) {
    if (!held_) {
      // Not the sender: keep knowing whether an endpoint exists (the outbox writer asks);
      // while none does, nobody sends (and no lease or record session is made).
      std::map<std::string, WebhookEndpoint> all;
      std::string after;
      if (!ReadWebhookEndpoints(store_, &all, &after).ok()) continue;
      const bool any =
          std::any_of(all.begin(), all.end(), [](const auto& kv) { return !kv.second.deleted; });
      state_->any_endpoint = any;
      if (!any) continue;
    }
    if (!HoldLease()) continue;
    if (!ReadRecords()) continue;
    Resolve(NowUnixMs());
    SendDue();
  }
}

// Takes or renews the lease; a new epoch (a take-over, or ours lost and taken again)
// starts from the store alone.
bool WebhookDeliverer::HoldLease() {
  const auto ttl = std::chrono::milliseconds(config_->lease_ttl_ms);
  if (held_) {
    auto renewed = store_->RenewLease(kWebhookLeaseSession, owner_, epoch_, ttl);
    if (renewed.ok()) {
      renewed_ = std::chrono::steady_clock::now();
      return true;
    }
    held_ = false;
    if (renewed.status().code() != StatusCode::kAborted)
      return false;  // the store: try again next pass
    spdlog::info("webhooks: another harness sends now");
  }
  auto lease = store_->AcquireLease(kWebhookLeaseSession, {owner_, url_}, ttl);
  if (!lease.ok() && lease.status().code() == StatusCode::kNotFound) {
    v1::CreateSessionRequest create;
    create.set_session_id(kWebhookLeaseSession);
    create.set_tenant("\x1fsinew.webhooks");
    create.set_title("webhook deliveries (the lease of the harness that sends)");
    create.set_initial_status(v1::SESSION_STATUS_COMPLETED);
    (void)store_->CreateSession(create);  // or another harness just did
    lease = store_->AcquireLease(kWebhookLeaseSession, {owner_, url_}, ttl);
  }
  if (!lease.ok()) return false;
  held_ = true;
  renewed_ = std::chrono::steady_clock::now();
  if (lease->epoch() != epoch_) {
    epoch_ = lease->epoch();
    Reset();
    spdlog::info("webhooks: this harness sends (lease epoch {})", epoch_);
  }
  return true;
}

void WebhookDeliverer::Reset() {
  registry_after_.clear();
  outbox_after_.clear();
  endpoints_.clear();
  attempts_loaded_.clear();
  recorded_.clear();
  resolved_events_.clear();
  pending_.clear();
  deliveries_.clear();
}

bool WebhookDeliverer::ReadRecords() {
  registry_read_unix_ms_ = NowUnixMs();
  std::string after = registry_after_;
  std::map<std::string, WebhookEndpoint> endpoints = endpoints_;
  if (!ReadWebhookEndpoints(store_, &endpoints, &after).ok()) return false;
  auto intents = ReadWebhookIntents(store_, &outbox_after_);
  registry_after_ = after;
  endpoints_ = std::move(endpoints);
  state_->any_endpoint = std::any_of(endpoints_.begin(), endpoints_.end(),
                                     [](const auto& kv) { return !kv.second.deleted; });
  for (const auto& [id, ep] : endpoints_) {
    if (ep.deleted) {
      const std::string& gone = id;  // clang 14 cannot capture a structured binding
      std::erase_if(deliveries_, [&gone](const auto& kv) { return kv.first.first == gone; });
    } else if (!attempts_loaded_.count(id)) {
      LoadAttempts(id);
    }
  }
  if (intents.ok()) {
    for (auto& in : *intents) pending_.push_back(Pending{std::move(in), 0, 0});
  }
  return true;
}

void WebhookDeliverer::LoadAttempts(const std::string& endpoint_id) {
  auto attempts = ReadWebhookAttempts(store_, endpoint_id);
  if (!attempts.ok()) return;  // next pass
  auto& rec = recorded_[endpoint_id];
  for (const auto& a : *attempts) {
    Recorded& r = rec[a.event_id];
    r.attempts = std::max(r.attempts, a.attempt);
    r.last_unix_ms = std::max(r.last_unix_ms, a.time_unix_ms);
    if (a.outcome == "delivered" || a.outcome == "failed") r.final = true;
  }
  attempts_loaded_.insert(endpoint_id);
}

int64_t WebhookDeliverer::Backoff(uint32_t attempts) const {
  int64_t wait = config_->webhooks.retry_initial_ms;
  for (uint32_t i = 1; i < attempts && wait < config_->webhooks.retry_max_ms; ++i) wait *= 2;
  return std::min<int64_t>(wait, config_->webhooks.retry_max_ms);
}

void WebhookDeliverer::Resolve(int64_t now) {
  const int64_t give_up_ms = static_cast<int64_t>(config_->webhooks.retry_for_seconds) * 1000;
  std::vector<Pending> still;
  for (auto& p : pending_) {
    if (stopping_) return;
    // An entry is looked at once the registry was read well after it was written, so that
    // an endpoint created just before its event (on another harness) is known by then.
    if (p.next_check_unix_ms > now ||
        p.intent.recorded_unix_ms + kRegistryMarginMs > registry_read_unix_ms_) {
      still.push_back(std::move(p));
      continue;
    }
    if (ResolveOne(p.intent)) continue;
    if (now - p.intent.recorded_unix_ms > give_up_ms) continue;  // its event never came
    ++p.checks;
    p.next_check_unix_ms = now + std::min<int64_t>(static_cast<int64_t>(config_->webhooks.poll_ms)
                                                       << std::min(p.checks, 10u),
                                                   config_->webhooks.retry_max_ms);
    still.push_back(std::move(p));
  }
  pending_ = std::move(still);
}

bool WebhookDeliverer::ResolveOne(const WebhookIntent& in) {
  const std::string event_id = WebhookEventId(in.session_id, in.seq);
  if (resolved_events_.count(event_id)) return true;  // a second entry for one event
  auto tenant = tenant_of_.find(in.session_id);
  if (tenant == tenant_of_.end()) {
    auto meta = store_->GetSession(in.session_id);
    if (!meta.ok()) return meta.status().code() == StatusCode::kNotFound;  // gone: nothing to send
    tenant = tenant_of_.emplace(in.session_id, meta->tenant()).first;
  }
  v1::GetEventsRequest req;
  req.set_session_id(in.session_id);
  req.set_from_seq(in.seq);
  req.set_to_seq(in.seq);
  req.set_limit(1);
  auto events = store_->GetEvents(req);
  if (!events.ok()) return events.status().code() == StatusCode::kNotFound;
  if (events->events_size() == 0) return events->next_seq() > in.seq;  // not written yet: wait
  const v1::Event& ev = events->events(0);
  const std::string type = WebhookTypeOf(ev);
  if (type.empty()) return true;  // the append it was written for was refused
  resolved_events_.insert(event_id);
  for (const auto& [id, ep] : endpoints_) {
    if (ep.deleted || ep.tenant != tenant->second || !WebhookWants(ep, type)) continue;
    if (ev.timestamp_unix_ms() < ep.created_unix_ms) continue;  // from its creation on
    const Recorded r = recorded_[id][event_id];
    if (r.final) continue;
    Delivery d;
    d.endpoint_id = id;
    d.event_id = event_id;
    d.type = type;
    d.session_id = in.session_id;
    d.seq = in.seq;
    d.body = WebhookBody(ev, tenant->second, type);
    d.event_unix_ms = ev.timestamp_unix_ms();
    d.attempts = r.attempts;
    d.next_unix_ms = r.attempts == 0 ? 0 : r.last_unix_ms + Backoff(r.attempts);
    deliveries_[{id, event_id}] = std::move(d);
  }
  return true;
}

void WebhookDeliverer::SendDue() {
  std::vector<std::pair<int64_t, std::pair<std::string, std::string>>> due;
  const int64_t now = NowUnixMs();
  for (const auto& [key, d] : deliveries_) {
    if (d.next_unix_ms <= now) due.push_back({d.next_unix_ms, key});
  }
  std::sort(due.begin(), due.end());
  const auto renew_every = std::chrono::milliseconds(config_->lease_ttl_ms / 3);
  for (const auto& [at, key] : due) {
    if (stopping_) return;
    // Send only while the lease is surely ours: renewed within a third of its ttl.
    if (std::chrono::steady_clock::now() - renewed_ > renew_every) {
      auto renewed = store_->RenewLease(kWebhookLeaseSession, owner_, epoch_,
                                        std::chrono::milliseconds(config_->lease_ttl_ms));
      if (!renewed.ok()) {
        held_ = false;
        return;
      }
      renewed_ = std::chrono::steady_clock::now();
    }
    auto it = deliveries_.find(key);
    if (it == deliveries_.end()) continue;
    Send(&it->second);
    if (it->second.next_unix_ms < 0) deliveries_.erase(it);  // delivered or failed
  }
}

void WebhookDeliverer::Send(Delivery* d) {
  const WebhookEndpoint& ep = endpoints_.at(d->endpoint_id);
  const int64_t now = NowUnixMs();
  const int64_t deadline =
      d->event_unix_ms + static_cast<int64_t>(config_->webhooks.retry_for_seconds) * 1000;
  WebhookAttempt a;
  a.event_id = d->event_id;
  a.type = d->type;
  a.session_id = d->session_id;
  a.seq = d->seq;
  a.attempt = d->attempts + 1;
  a.event_unix_ms = d->event_unix_ms;
  a.time_unix_ms = now;
  const WebhookUrlPolicy policy = WebhookPolicyOf(*config_, ep.tenant);
  auto target = CheckWebhookUrl(ep.url, policy);
  Result<std::string> resolve =
      target.ok() ? ResolveWebhookTarget(*target, policy) : Result<std::string>(target.status());
  auto signature = SignWebhook(ep.secret, d->event_id, now / 1000, d->body);
  if (!resolve.ok()) {
    a.error = resolve.status().message();
  } else if (!signature.ok()) {
    a.error = signature.status().message();
  } else {
    HttpRequest req;
    req.method = "POST";
    req.url = ep.url;
    req.body = d->body;
    req.headers = {"Content-Type: application/json", "User-Agent: sinew-webhooks",
                   "webhook-id: " + d->event_id, "webhook-timestamp: " + std::to_string(now / 1000),
                   "webhook-signature: " + *signature};
    req.resolve = {*resolve};
    req.timeout_ms = std::min<uint32_t>(config_->webhooks.timeout_ms, config_->lease_ttl_ms / 3);
    req.connect_timeout_ms = req.timeout_ms;
    req.max_response_bytes = 64 * 1024;
    req.stop = &stopping_;
    auto resp = http::Fetch(req);
    if (!resp.ok()) {
      a.error = resp.status().message();
    } else if (resp->stopped) {
      return;  // the harness stops: the next sender sends it
    } else {
      a.status_code = static_cast<int>(resp->status);
      if (resp->status < 200 || resp->status > 299)
        a.error = "HTTP " + std::to_string(resp->status);
    }
  }
  const int64_t next = NowUnixMs() + Backoff(a.attempt);
  if (a.error.empty()) {
    a.outcome = "delivered";
  } else if (next > deadline) {
    a.outcome = "failed";
  } else {
    a.outcome = "retrying";
    a.next_attempt_unix_ms = next;
  }
  if (Status s = RecordWebhookAttempt(store_, d->endpoint_id, a); !s.ok()) {
    spdlog::warn("webhooks: recording attempt {} of {} to {}: {}", a.attempt, d->event_id,
                 d->endpoint_id, s.message());
  }
  d->attempts = a.attempt;
  d->next_unix_ms = a.outcome == "retrying" ? next : -1;
}

}  // namespace sinew::harness
