// The webhook routes (docs/harness.md, "Webhooks"): /v1/webhooks[/{id}[/deliveries]],
// tenant-scoped (another tenant's endpoint is a 404), kept in the store (webhooks.h).
#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "api_handler.h"
#include "json_util.h"
#include "sinew/json_fields.h"
#include "webhook_signature.h"
#include "webhook_url.h"
#include "webhooks.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

constexpr size_t kMaxDescriptionBytes = 1024;

ApiResponse Json(int status, const json::object& body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

Result<std::string> NewEndpointId() {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::Internal("the random generator failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

class WebhookApi {
 public:
  explicit WebhookApi(const HarnessDeps* deps) : deps_(*deps) {}

  ApiResponse Handle(const ApiRequest& r, const Caller& caller,
                     const std::vector<std::string>& parts) {
    const std::string path = r.target.substr(0, r.target.find('?'));
    auto not_allowed = [&](const char* methods) {
      return ApiHandler::Error(405, "method_not_allowed",
                               r.method + " is not allowed on " + path + "; use " + methods);
    };
    if (parts.size() == 2) {
      if (r.method == "POST") {
        if (r.content_type.rfind("application/json", 0) != 0) {
          return ApiHandler::Error(415, "unsupported_media_type",
                                   "send the body as Content-Type: application/json");
        }
        return Create(r, caller);
      }
      if (r.method != "GET") return not_allowed("GET or POST");
      return List(caller);
    }
    auto endpoint = Owned(parts[2], caller.tenant);
    if (parts.size() == 3) {
      if (r.method != "GET" && r.method != "DELETE") return not_allowed("GET or DELETE");
      if (!endpoint.ok()) return ApiHandler::FromStatus(endpoint.status());
      if (r.method == "GET")
        return Json(200, json::object{{"webhook", WebhookEndpointJson(*endpoint)}});
      return Delete(r, caller, *endpoint);
    }
    if (parts.size() == 4 && parts[3] == "deliveries") {
      if (r.method != "GET") return not_allowed("GET");
      if (!endpoint.ok()) return ApiHandler::FromStatus(endpoint.status());
      auto attempts = ReadWebhookAttempts(deps_.store, endpoint->id);
      if (!attempts.ok()) return ApiHandler::FromStatus(attempts.status());
      return Json(200, json::object{{"deliveries", WebhookDeliveriesJson(*attempts)}});
    }
    return ApiHandler::Error(404, "not_found", "no such endpoint: " + path);
  }

 private:
  // The tenant's live endpoints, by id.
  Result<std::map<std::string, WebhookEndpoint>> Endpoints(const std::string& tenant) const {
    std::map<std::string, WebhookEndpoint> all;
    std::string after;
    SINEW_RETURN_IF_ERROR(ReadWebhookEndpoints(deps_.store, &all, &after));
    std::erase_if(all,
                  [&](const auto& kv) { return kv.second.deleted || kv.second.tenant != tenant; });
    return all;
  }

  Result<WebhookEndpoint> Owned(const std::string& id, const std::string& tenant) const {
    if (!IsSessionId(id))
      return Status::NotFound("no webhook '" + id + "' (ids are 32 lower-case hex digits)");
    SINEW_ASSIGN_OR_RETURN(auto mine, Endpoints(tenant));
    auto it = mine.find(id);
    // Another tenant's endpoint is indistinguishable from a missing one.
    if (it == mine.end()) return Status::NotFound("no webhook " + id);
    return it->second;
  }

  ApiResponse Create(const ApiRequest& r, const Caller& caller) {
    auto body = json_fields::ParseObject(r.body, "body");
    if (!body.ok()) return ApiHandler::FromStatus(body.status());
    if (Status s = json_fields::RejectUnknownKeys(*body, "url,events,description", "body");
        !s.ok()) {
      return ApiHandler::FromStatus(s);
    }
    WebhookEndpoint ep;
    ep.tenant = caller.tenant;
    if (Status s = json_fields::Require(*body, "url", "body"); !s.ok())
      return ApiHandler::FromStatus(s);
    if (Status s = json_fields::ReadString(*body, "url", "body", &ep.url); !s.ok())
      return ApiHandler::FromStatus(s);
    if (Status s = json_fields::ReadString(*body, "description", "body", &ep.description);
        !s.ok()) {
      return ApiHandler::FromStatus(s);
    }
    if (ep.description.size() > kMaxDescriptionBytes) {
      return ApiHandler::Error(400, "invalid_argument",
                               "body.description must be at most 1024 bytes");
    }
    const json::array* events = nullptr;
    if (Status s = json_fields::ReadArray(*body, "events", "body", &events); !s.ok())
      return ApiHandler::FromStatus(s);
    if (events != nullptr) {
      if (events->empty()) {
        return ApiHandler::Error(
            400, "invalid_argument",
            "body.events must name at least one event type (or be left out for all)");
      }
      std::set<std::string> seen;
      for (size_t i = 0; i < events->size(); ++i) {
        const json::value& e = (*events)[i];
        if (!e.is_string() || !IsWebhookEventType(std::string(e.as_string()))) {
          return ApiHandler::Error(400, "invalid_argument",
                                   "body.events[" + std::to_string(i) + "] must be one of " +
                                       kWebhookStatusChanged + ", " + kWebhookRequiresAction +
                                       ", " + kWebhookError);
        }
        if (seen.insert(std::string(e.as_string())).second) ep.events.emplace_back(e.as_string());
      }
    }
    if (auto target = CheckWebhookUrl(ep.url, WebhookPolicyOf(*deps_.config, caller.tenant));
        !target.ok()) {
      return ApiHandler::FromStatus(target.status());
    }
    auto id = NewEndpointId();
    auto secret = NewWebhookSecret();
    if (!id.ok() || !secret.ok())
      return ApiHandler::Error(500, "internal", "the random generator failed");
    ep.id = *id;
    ep.secret = *secret;
    ep.created_unix_ms = NowUnixMs();
    // The outbox is written from now on, on this harness at once (others within their
    // next registry read).
    deps_.webhooks->any_endpoint = true;
    if (Status s = RecordWebhookCreated(deps_.store, ep); !s.ok()) return ApiHandler::FromStatus(s);
    Audit(r, caller, ep, "webhook_create", "webhook " + ep.id + " to " + ep.url);
    json::object out = WebhookEndpointJson(ep);
    out["secret"] = ep.secret;  // shown here only
    return Json(201, json::object{{"webhook", std::move(out)}});
  }

  ApiResponse List(const Caller& caller) {
    auto mine = Endpoints(caller.tenant);
    if (!mine.ok()) return ApiHandler::FromStatus(mine.status());
    std::vector<const WebhookEndpoint*> order;
    for (const auto& [id, ep] : *mine) order.push_back(&ep);
    std::sort(order.begin(), order.end(),
              [](auto* a, auto* b) { return a->created_unix_ms < b->created_unix_ms; });
    json::array out;
    for (auto* ep : order) out.push_back(WebhookEndpointJson(*ep));
    return Json(200, json::object{{"webhooks", std::move(out)}});
  }

  ApiResponse Delete(const ApiRequest& r, const Caller& caller, const WebhookEndpoint& ep) {
    if (Status s = RecordWebhookDeleted(deps_.store, ep); !s.ok()) return ApiHandler::FromStatus(s);
    Audit(r, caller, ep, "webhook_delete", "webhook " + ep.id);
    return Json(200, json::object{{"webhook", WebhookEndpointJson(ep)}, {"deleted", true}});
  }

  // A record in the tenant's audit log (docs/security.md, "Audit log"); the change is
  // made already, so a failure here is logged by the store call's caller only.
  void Audit(const ApiRequest& r, const Caller& caller, const WebhookEndpoint& ep,
             const std::string& action, const std::string& detail) {
    v1::AppendAuditRequest req;
    req.set_session_id(ep.id);
    *req.mutable_audit() = AuditEvent(r, caller, action, detail).audit();
    (void)deps_.store->AppendAudit(req);
  }

  const HarnessDeps& deps_;
};

}  // namespace

WebhookRoutes MakeWebhookRoutes(const HarnessDeps* deps) {
  auto api = std::make_shared<WebhookApi>(deps);
  return [api](const ApiRequest& r, const Caller& caller, const std::vector<std::string>& parts) {
    return api->Handle(r, caller, parts);
  };
}

}  // namespace sinew::harness
