// ApiHandler: the /v1/schedules endpoints (docs/harness.md, "Schedules"). The ticks
// themselves are the Scheduler's (scheduler.h).
#include <algorithm>
#include <chrono>
#include <thread>

#include "api_handler.h"
#include "cron.h"
#include "schedule_records.h"
#include "json_util.h"
#include "sinew/json_fields.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadBool;
using json_fields::ReadString;
using json_fields::RejectUnknownKeys;

ApiResponse Json(int status, json::object body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

// The schedule as the API shows it; the next fire time from its log (null unless active).
json::object ScheduleJson(const ScheduleRecord& s, const ScheduleProgress* progress) {
  json::object o{{"id", s.id},
                 {"state", s.state},
                 {"cron", s.cron},
                 {"timezone", s.timezone},
                 {"missed", s.missed},
                 {"created_unix_ms", s.created_unix_ms}};
  boost::system::error_code ec;
  json::value task = json::parse(s.task_json, ec);
  o["task"] = ec ? json::value(nullptr) : std::move(task);
  o["next_run_unix_ms"] = nullptr;
  o["last_tick"] = nullptr;
  if (progress == nullptr) return o;
  if (progress->last_tick) {
    const v1::ScheduleTick& t = *progress->last_tick;
    o["last_tick"] = json::object{{"tick_unix_ms", t.tick_unix_ms()},
                                  {"session_id", t.session_id()},
                                  {"outcome", t.outcome()},
                                  {"missed", t.missed()},
                                  {"reason", t.reason()}};
  }
  if (s.state == "active") {
    auto cron = CronSchedule::Parse(s.cron, s.timezone);
    if (cron.ok()) {
      // Floor division: a time before the epoch is not a case here.
      o["next_run_unix_ms"] = cron->NextAfter(progress->due_after_unix_ms / 1000) * 1000;
    }
  }
  return o;
}

// How long a state change waits for a tick in progress (which holds the schedule's lease
// for a few store calls) before it answers 503.
constexpr auto kLeaseWait = std::chrono::seconds(2);

}  // namespace

ApiResponse ApiHandler::ScheduleRoutes(const ApiRequest& r, const Caller& caller, const std::vector<std::string>& parts,
                                       const std::string& query) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  auto only = [&](const char* method) -> std::optional<ApiResponse> {
    if (r.method == method) return std::nullopt;
    return Error(405, "method_not_allowed", r.method + " is not allowed on " + path + "; use " + method);
  };
  const std::string& tenant = caller.tenant;
  if (parts.size() == 2) {
    if (r.method == "POST") {
      if (r.content_type.rfind("application/json", 0) != 0) {
        return Error(415, "unsupported_media_type", "send the body as Content-Type: application/json");
      }
      return CreateSchedule(r, tenant);
    }
    if (r.method != "GET") return Error(405, "method_not_allowed", "use GET or POST on /v1/schedules");
    return ListSchedules(query, tenant);
  }
  const std::string& id = parts[2];
  if (parts.size() == 3) {
    if (r.method == "DELETE") return ChangeSchedule(id, tenant, "deleted");
    if (r.method != "GET") return Error(405, "method_not_allowed", "use GET or DELETE on " + path);
    ScheduleRecords records(deps_.store);
    auto record = records.Get(id, tenant);
    if (!record.ok()) return FromStatus(record.status());
    auto progress = records.Progress(*record);
    if (!progress.ok()) return FromStatus(progress.status());
    return Json(200, json::object{{"schedule", ScheduleJson(*record, &*progress)}});
  }
  if (parts.size() == 4 && (parts[3] == "pause" || parts[3] == "resume")) {
    if (auto e = only("POST")) return *e;
    return ChangeSchedule(id, tenant, parts[3] == "pause" ? "paused" : "active");
  }
  return Error(404, "not_found", "no such endpoint: " + path);
}

ApiResponse ApiHandler::CreateSchedule(const ApiRequest& r, const std::string& tenant) {
  auto body = ParseObject(r.body, "request body");
  if (!body.ok()) return FromStatus(body.status());
  Status keys = RejectUnknownKeys(*body, "cron,timezone,task,missed,paused", "body");
  if (!keys.ok()) return FromStatus(keys);
  ScheduleRecord s;
  s.timezone = "UTC";
  s.missed = "skip";
  bool paused = false;
  for (const Status& read : {ReadString(*body, "cron", "body", &s.cron), ReadString(*body, "timezone", "body", &s.timezone),
                             ReadString(*body, "missed", "body", &s.missed), ReadBool(*body, "paused", "body", &paused)}) {
    if (!read.ok()) return FromStatus(read);
  }
  if (s.cron.empty()) return Error(400, "invalid_argument", "body.cron is required (a cron expression)");
  if (s.missed != "skip" && s.missed != "run_once") {
    return Error(400, "invalid_argument", "body.missed must be \"skip\" or \"run_once\"");
  }
  auto cron = CronSchedule::Parse(s.cron, s.timezone);
  if (!cron.ok()) return Error(400, "invalid_argument", "body: " + cron.status().message());
  const uint32_t min_interval = deps_.config->schedule_min_interval_seconds;
  if (cron->MinIntervalSeconds() < min_interval) {
    return Error(400, "invalid_argument",
                 "body.cron fires " + std::to_string(cron->MinIntervalSeconds()) +
                     " s apart at times; schedules may fire at most once every " + std::to_string(min_interval) +
                     " s (schedule_min_interval_seconds)");
  }
  const json::value* task = body->if_contains("task");
  if (task == nullptr || !task->is_object()) {
    return Error(400, "invalid_argument", "body.task is required: the task object POST /v1/sessions takes");
  }
  // The template is checked as a session's task would be, now; each tick checks it again.
  s.task_json = json::serialize(*task);
  auto checked = NewSessionRequest(s.task_json, tenant);
  if (!checked.ok()) return Error(400, "invalid_argument", "body.task: " + checked.status().message());
  // What is stored is what a tick would send, secrets redacted.
  json::object stored = task->as_object();
  for (const char* key : {"prompt", "title", "system"}) {
    if (auto* v = stored.if_contains(key); v != nullptr && v->is_string()) {
      *v = deps_.vault->Redact(std::string(v->as_string()));
    }
  }
  if (auto* meta = stored.if_contains("metadata"); meta != nullptr && meta->is_object()) {
    for (auto& [k, v] : meta->as_object()) {
      if (v.is_string()) v = deps_.vault->Redact(std::string(v.as_string()));
    }
  }
  s.task_json = json::serialize(stored);
  ScheduleRecords records(deps_.store);
  auto created = records.Create(tenant, s, paused);
  if (!created.ok()) return FromStatus(created.status());
  deps_.metrics->Add("sinew_harness_schedules_created_total", "");
  ScheduleProgress progress;
  progress.due_after_unix_ms = created->created_unix_ms;
  return Json(201, json::object{{"schedule", ScheduleJson(*created, &progress)}});
}

ApiResponse ApiHandler::ListSchedules(const std::string& query, const std::string& tenant) {
  bool has_limit = false;
  const std::string limit_text = QueryParam(query, "limit", &has_limit);
  uint64_t limit = 50;
  if (has_limit) {
    auto v = ParseDecimal(limit_text, 1000);
    if (!v || *v < 1) return Error(400, "invalid_argument", "query parameter limit must be an integer in [1, 1000]");
    limit = *v;
  }
  const std::string page_token = QueryParam(query, "page_token");
  if (page_token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Error(400, "invalid_argument", "page_token is not one this API issued; repeat the request without it");
  }
  ScheduleRecords records(deps_.store);
  auto page = records.List(tenant, static_cast<uint32_t>(limit), page_token);
  if (!page.ok()) return FromStatus(page.status());
  json::array out;
  for (const auto& s : page->records) {
    auto progress = records.Progress(s);
    out.push_back(ScheduleJson(s, progress.ok() ? &*progress : nullptr));
  }
  return Json(200, json::object{{"schedules", std::move(out)}, {"next_page_token", page->next_page_token}});
}

ApiResponse ApiHandler::ChangeSchedule(const std::string& id, const std::string& tenant, const std::string& state) {
  ScheduleRecords records(deps_.store);
  auto record = records.Get(id, tenant);
  if (!record.ok()) return FromStatus(record.status());
  // Under the schedule's lease, so that no tick is half-written meanwhile; a tick holds it
  // for a few store calls, a harness that died holding it until its ttl ends.
  const std::string owner = deps_.owner + "/api";
  const auto ttl = std::chrono::milliseconds(deps_.config->lease_ttl_ms);
  const auto give_up = std::chrono::steady_clock::now() + kLeaseWait;
  Result<v1::Lease> lease = Status::Unavailable("");
  while (true) {
    lease = deps_.store->AcquireLease(id, {owner, deps_.config->advertise_url}, ttl);
    if (lease.ok() || lease.status().code() != StatusCode::kFailedPrecondition ||
        std::chrono::steady_clock::now() >= give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!lease.ok()) {
    if (lease.status().code() != StatusCode::kFailedPrecondition) return FromStatus(lease.status());
    const int64_t seconds = std::max<int64_t>(1, (deps_.config->lease_ttl_ms + 999) / 1000);
    ApiResponse busy = Error(503, "unavailable",
                             "schedule " + id + " is being ticked by a harness that does not finish; retry in " +
                                 std::to_string(seconds) + " s (its lease ends by then)");
    busy.headers.emplace_back("Retry-After", std::to_string(seconds));
    return busy;
  }
  auto release = [&] { (void)deps_.store->ReleaseLease(id, owner, lease->epoch()); };
  // Read again under the lease: the state now, and the log's end to append after.
  auto now = records.Get(id, tenant);
  if (!now.ok()) {
    release();
    return FromStatus(now.status());
  }
  if (now->state == state) {  // pausing a paused schedule, resuming an active one: done already
    auto progress = records.Progress(*now);
    release();
    return Json(200, json::object{{"schedule", ScheduleJson(*now, progress.ok() ? &*progress : nullptr)}});
  }
  v1::Event ev;
  auto* change = ev.mutable_status_change();
  change->set_from(now->state == "paused" ? v1::SESSION_STATUS_WAITING_FOR_INPUT : v1::SESSION_STATUS_RUNNING);
  change->set_to(state == "paused"   ? v1::SESSION_STATUS_WAITING_FOR_INPUT
                 : state == "active" ? v1::SESSION_STATUS_RUNNING
                                     : v1::SESSION_STATUS_CANCELLED);
  change->set_reason(state == "paused" ? "paused by the user" : state == "active" ? "resumed by the user" : "deleted by the user");
  Status appended = records.Append(*now, lease->epoch(), {ev});
  release();
  if (!appended.ok()) return FromStatus(appended);
  ScheduleRecord after = *now;
  after.state = state;
  after.next_seq = now->next_seq + 1;
  if (state == "deleted") return Json(200, json::object{{"schedule", ScheduleJson(after, nullptr)}});
  auto progress = records.Progress(after);
  return Json(200, json::object{{"schedule", ScheduleJson(after, progress.ok() ? &*progress : nullptr)}});
}

}  // namespace sinew::harness
