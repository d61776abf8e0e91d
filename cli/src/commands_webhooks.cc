// sinew webhook create | ls | rm | deliveries: a tenant's webhook endpoints (/v1/webhooks;
// docs/harness.md, "Webhooks") from the command line.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "sinew/json_fields.h"

namespace sinew::cli {
namespace json = boost::json;
namespace {

std::string Str(const json::object& o, const char* key) { return json_fields::StringField(o, key); }

// One line per endpoint: id, url, event types (or "all"), created.
void PrintWebhookLine(const json::object& w) {
  std::string events;
  if (const json::array* list = json_fields::ArrayField(w, "events")) {
    for (const auto& e : *list) {
      if (e.is_string()) events += (events.empty() ? "" : ",") + std::string(e.as_string());
    }
  }
  std::cout << Str(w, "id") << "  " << Str(w, "url") << "  " << (events.empty() ? "all" : events)
            << "  "
            << FormatTime(static_cast<int64_t>(json_fields::UintField(w, "created_unix_ms")))
            << " UTC\n";
}

// One line per delivery: event id, type, state, attempts, last status or error.
void PrintDeliveryLine(const json::object& d) {
  const std::string error = Str(d, "last_error");
  std::cout << Str(d, "event_id") << "  " << Str(d, "type") << "  " << Str(d, "state")
            << "  attempts " << json_fields::UintField(d, "attempts") << "  "
            << json_fields::UintField(d, "last_status_code") << (error.empty() ? "" : "  " + error)
            << "\n";
}

}  // namespace

void AddWebhookCommands(CLI::App& app, Context& ctx) {
  auto* webhook = app.add_subcommand("webhook", "webhook endpoints of your tenant (/v1/webhooks)");
  webhook->require_subcommand(1);

  struct CreateArgs {
    std::string url, description;
    std::vector<std::string> events;
  };
  auto create = std::make_shared<CreateArgs>();
  auto* cmd = webhook->add_subcommand(
      "create", "create an endpoint; prints its id and its secret (shown once)");
  cmd->add_option("url", create->url, "http(s) URL the events are POSTed to")->required();
  cmd->add_option("--event", create->events,
                  "session.status_changed, session.requires_action or session.error (repeatable; "
                  "default: all)");
  cmd->add_option("--description", create->description, "a note of yours");
  cmd->callback([&ctx, create] {
    json::object body{{"url", create->url}};
    if (!create->events.empty()) {
      json::array events;
      for (const auto& e : create->events) events.emplace_back(e);
      body["events"] = std::move(events);
    }
    if (!create->description.empty()) body["description"] = create->description;
    auto v = ctx.Api().JsonCall("POST", "/v1/webhooks", json::serialize(body));
    if (!v.ok()) return ctx.Fail(v.status());
    const json::object* w =
        v->is_object() ? json_fields::ObjectField(v->as_object(), "webhook") : nullptr;
    if (ctx.json || w == nullptr) {
      std::cout << json::serialize(*v) << "\n";
    } else {
      std::cout << Str(*w, "id") << "  " << Str(*w, "secret") << "\n";
    }
  });

  cmd = webhook->add_subcommand("ls", "list your endpoints, oldest first");
  cmd->callback([&ctx] {
    auto v = ctx.Api().JsonCall("GET", "/v1/webhooks");
    if (!v.ok()) return ctx.Fail(v.status());
    const json::array* list =
        v->is_object() ? json_fields::ArrayField(v->as_object(), "webhooks") : nullptr;
    for (const auto& w : list ? *list : json::array{}) {
      if (!w.is_object()) continue;
      if (ctx.json) {
        std::cout << json::serialize(w) << "\n";
      } else {
        PrintWebhookLine(w.as_object());
      }
    }
  });

  auto rm_ids = std::make_shared<std::vector<std::string>>();
  cmd = webhook->add_subcommand("rm", "delete endpoints");
  cmd->add_option("ids", *rm_ids, "endpoint ids")->required();
  cmd->callback([&ctx, rm_ids] {
    ctx.DeleteEach("/v1/webhooks", *rm_ids);
  });

  auto deliveries_id = std::make_shared<std::string>();
  cmd = webhook->add_subcommand("deliveries", "an endpoint's delivery log, newest first");
  cmd->add_option("id", *deliveries_id, "endpoint id")->required();
  cmd->callback([&ctx, deliveries_id] {
    auto v = ctx.Api().JsonCall("GET", "/v1/webhooks/" + *deliveries_id + "/deliveries");
    if (!v.ok()) return ctx.Fail(v.status());
    const json::array* list =
        v->is_object() ? json_fields::ArrayField(v->as_object(), "deliveries") : nullptr;
    for (const auto& d : list ? *list : json::array{}) {
      if (!d.is_object()) continue;
      if (ctx.json) {
        std::cout << json::serialize(d) << "\n";
      } else {
        PrintDeliveryLine(d.as_object());
      }
    }
  });
}

}  // namespace sinew::cli
