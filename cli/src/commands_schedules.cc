// sinew schedule create | ls | show | pause | resume | rm: schedules (/v1/schedules;
// docs/harness.md, "Schedules") from the command line.
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

const json::object* Field(const json::value& v, const char* key) {
  return v.is_object() ? json_fields::ObjectField(v.as_object(), key) : nullptr;
}

// One line per schedule: id, state, cron, zone, next fire time.
void PrintScheduleLine(const json::object& s) {
  const json::value* next = s.if_contains("next_run_unix_ms");
  std::cout << Str(s, "id") << "  " << Str(s, "state") << "  " << Str(s, "cron") << "  " << Str(s, "timezone")
            << "  "
            << (next != nullptr && next->is_int64() ? "next " + FormatTime(next->as_int64()) + " UTC" : "-")
            << "\n";
}

void PrintScheduleAnswer(Context& ctx, const json::value& v) {
  if (ctx.json) {
    std::cout << json::serialize(v) << "\n";
    return;
  }
  if (const json::object* s = Field(v, "schedule")) PrintScheduleLine(*s);
}

// `sinew schedule VERB ID...` as POST /v1/schedules/ID/VERB (pause, resume).
void AddVerb(CLI::App& schedule, Context& ctx, const std::string& verb, const std::string& help) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto* cmd = schedule.add_subcommand(verb, help);
  cmd->add_option("ids", *ids, "schedule ids")->required();
  cmd->callback([&ctx, ids, verb] {
    for (const auto& id : *ids) {
      auto v = ctx.Api().JsonCall("POST", "/v1/schedules/" + id + "/" + verb);
      if (!v.ok()) {
        ctx.Fail(v.status());
        continue;
      }
      PrintScheduleAnswer(ctx, *v);
    }
  });
}

}  // namespace

void AddScheduleCommands(CLI::App& app, Context& ctx) {
  auto* schedule = app.add_subcommand("schedule", "sessions on a cron schedule (/v1/schedules)");
  schedule->require_subcommand(1);

  struct CreateArgs {
    std::string cron, timezone, missed, model, task, prompt;
    bool paused = false;
  };
  auto create = std::make_shared<CreateArgs>();
  auto* cmd = schedule->add_subcommand("create", "create a schedule; prints its id");
  cmd->add_option("--cron", create->cron, "cron expression, e.g. \"0 9 * * MON-FRI\" or @daily")->required();
  cmd->add_option("--timezone", create->timezone, "IANA time zone of the cron (default UTC)");
  cmd->add_option("--missed", create->missed, "skip (default) or run_once: fire times missed while no harness ran");
  cmd->add_flag("--paused", create->paused, "create it paused");
  cmd->add_option("--model", create->model, "model of each session (default: the harness's)");
  cmd->add_option("--task", create->task, "the whole task as a JSON object (instead of a prompt)");
  cmd->add_option("prompt", create->prompt, "the prompt of each session");
  cmd->callback([&ctx, create] {
    json::object task;
    if (!create->task.empty()) {
      if (!create->prompt.empty() || !create->model.empty()) {
        return ctx.Fail(Status::InvalidArgument("give --task or a prompt (with --model), not both"));
      }
      auto parsed = json_fields::ParseObject(create->task, "--task");
      if (!parsed.ok()) return ctx.Fail(parsed.status());
      task = std::move(*parsed);
    } else {
      if (create->prompt.empty()) return ctx.Fail(Status::InvalidArgument("give a prompt (or --task)"));
      task["prompt"] = create->prompt;
      if (!create->model.empty()) task["model"] = create->model;
    }
    json::object body{{"cron", create->cron}, {"task", std::move(task)}};
    if (!create->timezone.empty()) body["timezone"] = create->timezone;
    if (!create->missed.empty()) body["missed"] = create->missed;
    if (create->paused) body["paused"] = true;
    auto v = ctx.Api().JsonCall("POST", "/v1/schedules", json::serialize(body));
    if (!v.ok()) return ctx.Fail(v.status());
    if (ctx.json) {
      std::cout << json::serialize(*v) << "\n";
    } else if (const json::object* s = Field(*v, "schedule")) {
      std::cout << Str(*s, "id") << "\n";
    }
  });

  cmd = schedule->add_subcommand("ls", "list your schedules, newest first");
  cmd->callback([&ctx] {
    std::string token;
    do {
      std::string path = "/v1/schedules?limit=100";
      if (!token.empty()) path += "&page_token=" + token;
      auto v = ctx.Api().JsonCall("GET", path);
      if (!v.ok()) return ctx.Fail(v.status());
      const json::array* list = v->is_object() ? json_fields::ArrayField(v->as_object(), "schedules") : nullptr;
      for (const auto& s : list ? *list : json::array{}) {
        if (!s.is_object()) continue;
        if (ctx.json) {
          std::cout << json::serialize(s) << "\n";
        } else {
          PrintScheduleLine(s.as_object());
        }
      }
      token = v->is_object() ? Str(v->as_object(), "next_page_token") : "";
    } while (!token.empty());
  });

  auto show_id = std::make_shared<std::string>();
  cmd = schedule->add_subcommand("show", "one schedule, with its last tick");
  cmd->add_option("id", *show_id, "schedule id")->required();
  cmd->callback([&ctx, show_id] {
    auto v = ctx.Api().JsonCall("GET", "/v1/schedules/" + *show_id);
    if (!v.ok()) return ctx.Fail(v.status());
    const json::object* s = Field(*v, "schedule");
    std::cout << json::serialize(ctx.json || s == nullptr ? *v : json::value(*s)) << "\n";
  });

  AddVerb(*schedule, ctx, "pause", "pause schedules (their fire times pass without sessions)");
  AddVerb(*schedule, ctx, "resume", "resume paused schedules (they fire from now on)");

  auto rm_ids = std::make_shared<std::vector<std::string>>();
  cmd = schedule->add_subcommand("rm", "delete schedules (their sessions stay)");
  cmd->add_option("ids", *rm_ids, "schedule ids")->required();
  cmd->callback([&ctx, rm_ids] {
    for (const auto& id : *rm_ids) {
      auto v = ctx.Api().JsonCall("DELETE", "/v1/schedules/" + id);
      if (!v.ok()) {
        ctx.Fail(v.status());
        continue;
      }
      PrintScheduleAnswer(ctx, *v);
    }
  });
}

}  // namespace sinew::cli
