#include "webhooks.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "json_util.h"
#include "sinew/json_fields.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

// Internal audit log names: they start with a unit separator, which no tenant name of a
// config or an API key file carries.
const std::string kRegistryLog = "\x1fsinew.webhooks.endpoints";
const std::string kOutboxLog = "\x1fsinew.webhooks.outbox";
std::string DeliveryLog(const std::string& endpoint_id) {
  return "\x1fsinew.webhooks.deliveries." + endpoint_id;
}

Result<v1::AuditRecord> Append(store::SessionStore* store, const std::string& log,
                               const std::string& session_id, const std::string& action,
                               const std::string& detail, int64_t time_ms) {
  v1::AppendAuditRequest req;
  req.set_session_id(session_id);
  auto* a = req.mutable_audit();
  a->set_tenant(log);
  a->set_action(action);
  a->set_detail(detail);
  a->set_time_unix_ms(time_ms);
  return store->AppendAudit(req);
}

// Every record of `log` after record id *after, a page at a time; *after moves along.
Status ReadLog(store::SessionStore* store, const std::string& log, std::string* after,
               const std::function<void(const v1::AuditRecord&)>& each) {
  while (true) {
    v1::ListAuditRequest req;
    req.set_tenant(log);
    req.set_page_size(1000);
    req.set_page_token(*after);
    SINEW_ASSIGN_OR_RETURN(v1::ListAuditResponse page, store->ListAudit(req));
    for (const auto& r : page.records()) {
      each(r);
      *after = r.id();
    }
    if (page.next_page_token().empty()) return Status::Ok();
  }
}

std::string Str(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
}

int64_t Int(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v != nullptr && v->is_int64()
             ? v->as_int64()
             : (v != nullptr && v->is_uint64() ? static_cast<int64_t>(v->as_uint64()) : 0);
}

}  // namespace

bool IsWebhookEventType(const std::string& type) {
  return type == kWebhookStatusChanged || type == kWebhookRequiresAction || type == kWebhookError;
}

std::string WebhookTypeOf(const v1::Event& ev) {
  if (ev.has_status_change()) {
    return ev.status_change().to() == v1::SESSION_STATUS_REQUIRES_ACTION ? kWebhookRequiresAction
                                                                         : kWebhookStatusChanged;
  }
  if (ev.has_error()) return kWebhookError;
  return "";
}

bool WebhookWants(const WebhookEndpoint& ep, const std::string& type) {
  if (ep.events.empty()) return true;
  for (const auto& e : ep.events) {
    if (e == type || (e == kWebhookStatusChanged && type == kWebhookRequiresAction)) return true;
  }
  return false;
}

std::string WebhookEventId(const std::string& session_id, uint64_t seq) {
  return "evt_" + session_id + "_" + std::to_string(seq);
}

std::string WebhookBody(const v1::Event& ev, const std::string& tenant, const std::string& type) {
  json::object data{
      {"session_id", ev.session_id()}, {"seq", ev.seq()}, {"tenant", SanitizeUtf8(tenant)}};
  if (ev.has_status_change()) {
    data["from"] = store::SessionStatusName(ev.status_change().from());
    data["to"] = store::SessionStatusName(ev.status_change().to());
    data["reason"] = SanitizeUtf8(ev.status_change().reason());
  } else if (ev.has_error()) {
    data["code"] = ev.error().code();
    data["message"] = SanitizeUtf8(ev.error().message());
    data["retryable"] = ev.error().retryable();
    data["http_status"] = ev.error().http_status();
    if (!ev.error().limit().empty()) data["limit"] = ev.error().limit();
  }
  return json::serialize(json::object{{"type", type},
                                      {"id", WebhookEventId(ev.session_id(), ev.seq())},
                                      {"timestamp_unix_ms", ev.timestamp_unix_ms()},
                                      {"data", std::move(data)}});
}

json::object WebhookEndpointJson(const WebhookEndpoint& ep) {
  json::array events;
  for (const auto& e : ep.events) events.emplace_back(e);
  return json::object{{"id", ep.id},
                      {"url", ep.url},
                      {"events", std::move(events)},
                      {"description", ep.description},
                      {"created_unix_ms", ep.created_unix_ms}};
}

WebhookUrlPolicy WebhookPolicyOf(const HarnessConfig& config, const std::string& tenant) {
  WebhookUrlPolicy p;
  auto it = config.tenants.find(tenant);
  if (it != config.tenants.end()) {
    p.allow_private = it->second.webhook_allow_private;
    p.allow = it->second.webhook_allow;
  }
  return p;
}

Status ReadWebhookEndpoints(store::SessionStore* store, std::map<std::string, WebhookEndpoint>* out,
                            std::string* after) {
  return ReadLog(store, kRegistryLog, after, [&](const v1::AuditRecord& r) {
    auto parsed = json_fields::ParseObject(r.audit().detail(), "webhook record");
    if (!parsed.ok()) return;
    const json::object& o = *parsed;
    const std::string id = Str(o, "id");
    if (id.empty()) return;
    if (r.audit().action() == "delete") {
      if (auto it = out->find(id); it != out->end()) it->second.deleted = true;
      return;
    }
    if (r.audit().action() != "create") return;
    WebhookEndpoint ep;
    ep.id = id;
    ep.tenant = Str(o, "tenant");
    ep.url = Str(o, "url");
    ep.description = Str(o, "description");
    ep.secret = Str(o, "secret");
    ep.created_unix_ms = Int(o, "created_unix_ms");
    if (auto* ev = o.if_contains("events"); ev != nullptr && ev->is_array()) {
      for (const auto& e : ev->as_array()) {
        if (e.is_string()) ep.events.emplace_back(e.as_string());
      }
    }
    (*out)[id] = std::move(ep);
  });
}

Status RecordWebhookCreated(store::SessionStore* store, const WebhookEndpoint& ep) {
  json::object o = WebhookEndpointJson(ep);
  o["tenant"] = ep.tenant;
  o["secret"] = ep.secret;
  return Append(store, kRegistryLog, ep.id, "create", json::serialize(o), ep.created_unix_ms)
      .status();
}

Status RecordWebhookDeleted(store::SessionStore* store, const WebhookEndpoint& ep) {
  return Append(store, kRegistryLog, ep.id, "delete",
                json::serialize(json::object{{"id", ep.id}, {"tenant", ep.tenant}}), NowUnixMs())
      .status();
}

Status RecordWebhookIntent(store::SessionStore* store, const std::string& session_id,
                           uint64_t seq) {
  return Append(store, kOutboxLog, session_id, "event", std::to_string(seq), NowUnixMs()).status();
}

Result<std::vector<WebhookIntent>> ReadWebhookIntents(store::SessionStore* store,
                                                      std::string* after) {
  std::vector<WebhookIntent> out;
  SINEW_RETURN_IF_ERROR(ReadLog(store, kOutboxLog, after, [&](const v1::AuditRecord& r) {
    WebhookIntent in;
    in.session_id = r.session_id();
    in.seq = std::strtoull(r.audit().detail().c_str(), nullptr, 10);
    in.recorded_unix_ms = r.recorded_unix_ms();
    if (in.seq > 0) out.push_back(std::move(in));
  }));
  return out;
}

Status RecordWebhookAttempt(store::SessionStore* store, const std::string& endpoint_id,
                            const WebhookAttempt& a) {
  json::object o{{"event_id", a.event_id},
                 {"type", a.type},
                 {"seq", a.seq},
                 {"attempt", a.attempt},
                 {"event_unix_ms", a.event_unix_ms},
                 {"status_code", a.status_code},
                 {"error", SanitizeUtf8(a.error.substr(0, 1024))},
                 {"outcome", a.outcome},
                 {"next_attempt_unix_ms", a.next_attempt_unix_ms}};
  return Append(store, DeliveryLog(endpoint_id), a.session_id, "attempt", json::serialize(o),
                a.time_unix_ms)
      .status();
}

Result<std::vector<WebhookAttempt>> ReadWebhookAttempts(store::SessionStore* store,
                                                        const std::string& endpoint_id) {
  std::vector<WebhookAttempt> out;
  std::string after;
  SINEW_RETURN_IF_ERROR(
      ReadLog(store, DeliveryLog(endpoint_id), &after, [&](const v1::AuditRecord& r) {
        auto parsed = json_fields::ParseObject(r.audit().detail(), "webhook record");
        if (!parsed.ok()) return;
        const json::object& o = *parsed;
        WebhookAttempt a;
        a.event_id = Str(o, "event_id");
        a.type = Str(o, "type");
        a.session_id = r.session_id();
        a.seq = static_cast<uint64_t>(Int(o, "seq"));
        a.attempt = static_cast<uint32_t>(Int(o, "attempt"));
        a.time_unix_ms = r.audit().time_unix_ms();
        a.event_unix_ms = Int(o, "event_unix_ms");
        a.status_code = static_cast<int>(Int(o, "status_code"));
        a.error = Str(o, "error");
        a.outcome = Str(o, "outcome");
        a.next_attempt_unix_ms = Int(o, "next_attempt_unix_ms");
        out.push_back(std::move(a));
      }));
  return out;
}

json::array WebhookDeliveriesJson(const std::vector<WebhookAttempt>& attempts) {
  std::vector<std::string> order;
  std::map<std::string, json::object> by_event;
  for (const auto& a : attempts) {
    auto [it, fresh] = by_event.try_emplace(a.event_id);
    json::object& d = it->second;
    if (fresh) {
      order.push_back(a.event_id);
      d = json::object{
          {"event_id", a.event_id}, {"type", a.type}, {"session_id", a.session_id},
          {"seq", a.seq},           {"attempts", 0},  {"event_unix_ms", a.event_unix_ms}};
    }
    // A harness that crashed after sending and before recording sends again: its
    // attempt numbers restart from what was recorded, never below.
    d["attempts"] = std::max<int64_t>(d["attempts"].as_int64(), a.attempt);
    if (d.contains("delivered_unix_ms")) continue;  // a resend after a crash changes nothing
    d["state"] = a.outcome;
    d["last_attempt_unix_ms"] = a.time_unix_ms;
    d["last_status_code"] = a.status_code;
    d["last_error"] = a.error;
    if (a.outcome == "delivered") d["delivered_unix_ms"] = a.time_unix_ms;
    if (a.outcome == "retrying") {
      d["next_attempt_unix_ms"] = a.next_attempt_unix_ms;
    } else {
      d.erase("next_attempt_unix_ms");
    }
  }
  json::array out;
  for (auto it = order.rbegin(); it != order.rend(); ++it) out.push_back(std::move(by_event[*it]));
  return out;
}

}  // namespace sinew::harness
