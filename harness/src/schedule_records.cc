#include "schedule_records.h"

#include <openssl/sha.h>

#include <algorithm>

#include "api_handler.h"

namespace sinew::harness {
namespace {

// No API key's tenant starts with a control character: the schedules of tenant "t" live
// under "\x1fschedules:t" (the sandbox records under "\x1fsandboxes:t").
constexpr std::string_view kRecordTenantPrefix = "\x1fschedules:";

std::string Meta(const v1::Session& s, const std::string& key) {
  auto it = s.metadata().find(key);
  return it == s.metadata().end() ? "" : it->second;
}

// How many events Progress reads per step back from the end of a log.
constexpr uint64_t kProgressWindow = 32;

}  // namespace

std::string ScheduleStateOf(v1::SessionStatus status) {
  switch (status) {
    case v1::SESSION_STATUS_WAITING_FOR_INPUT:
      return "paused";
    case v1::SESSION_STATUS_CANCELLED:
      return "deleted";
    default:
      return "active";
  }
}

std::string ScheduleRecords::RecordTenant(const std::string& tenant) {
  return std::string(kRecordTenantPrefix) + tenant;
}

bool ScheduleRecords::IsRecordTenant(const std::string& store_tenant) {
  return !store_tenant.empty() && store_tenant[0] == '\x1f';
}

std::optional<std::string> ScheduleRecords::TenantOfScheduleRecord(const std::string& store_tenant) {
  if (store_tenant.rfind(kRecordTenantPrefix, 0) != 0) return std::nullopt;
  return store_tenant.substr(kRecordTenantPrefix.size());
}

std::string ScheduleRecords::TickSessionId(const std::string& schedule_id, int64_t tick_unix_ms) {
  const std::string input = schedule_id + "@" + std::to_string(tick_unix_ms);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  unsigned char raw[16];
  const auto ms = static_cast<uint64_t>(tick_unix_ms);
  for (int i = 0; i < 6; ++i) raw[i] = static_cast<unsigned char>(ms >> (8 * (5 - i)));
  std::copy(digest, digest + 10, raw + 6);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::optional<ScheduleRecord> ScheduleRecords::FromSession(const v1::Session& s) {
  auto tenant = TenantOfScheduleRecord(s.tenant());
  if (!tenant || Meta(s, "kind") != "schedule") return std::nullopt;
  ScheduleRecord r;
  r.id = s.id();
  r.tenant = *tenant;
  r.state = ScheduleStateOf(s.status());
  r.cron = Meta(s, "cron");
  r.timezone = Meta(s, "timezone");
  r.missed = Meta(s, "missed");
  r.task_json = Meta(s, "task");
  r.created_unix_ms = s.created_unix_ms();
  r.next_seq = s.next_seq();
  return r;
}

Result<ScheduleRecord> ScheduleRecords::Create(const std::string& tenant, const ScheduleRecord& schedule,
                                               bool paused) {
  v1::CreateSessionRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_title("schedule " + schedule.cron);
  req.set_initial_status(paused ? v1::SESSION_STATUS_WAITING_FOR_INPUT : v1::SESSION_STATUS_RUNNING);
  auto& meta = *req.mutable_metadata();
  meta["kind"] = "schedule";
  meta["cron"] = schedule.cron;
  meta["timezone"] = schedule.timezone;
  meta["missed"] = schedule.missed;
  meta["task"] = schedule.task_json;
  SINEW_ASSIGN_OR_RETURN(v1::Session created, store_->CreateSession(req));
  return *FromSession(created);
}

Result<ScheduleRecord> ScheduleRecords::Get(const std::string& id, const std::string& tenant) {
  if (!IsSessionId(id)) return Status::NotFound("no schedule '" + id + "' (ids are 32 lower-case hex digits)");
  auto meta = store_->GetSession(id);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) return Status::NotFound("no schedule " + id);
    return meta.status();
  }
  // Another tenant's schedule, a session and a deleted schedule are indistinguishable from
  // a missing one.
  auto record = FromSession(*meta);
  if (!record || record->tenant != tenant || record->state == "deleted") {
    return Status::NotFound("no schedule " + id);
  }
  return *record;
}

Result<ScheduleProgress> ScheduleRecords::Progress(const ScheduleRecord& record) {
  ScheduleProgress progress;
  progress.due_after_unix_ms = record.created_unix_ms;
  std::optional<int64_t> resumed;  // the latest resume after the last tick
  uint64_t to = record.next_seq - 1;
  while (to >= 2) {
    v1::GetEventsRequest req;
    req.set_session_id(record.id);
    req.set_from_seq(to > kProgressWindow ? to - kProgressWindow + 1 : 2);
    req.set_to_seq(to);
    SINEW_ASSIGN_OR_RETURN(v1::GetEventsResponse resp, store_->GetEvents(req));
    for (int i = resp.events_size() - 1; i >= 0; --i) {
      const v1::Event& ev = resp.events(i);
      if (ev.has_schedule_tick()) {
        progress.last_tick = ev.schedule_tick();
        break;
      }
      if (!resumed && ev.has_status_change() && ev.status_change().to() == v1::SESSION_STATUS_RUNNING) {
        resumed = ev.timestamp_unix_ms();
      }
    }
    if (progress.last_tick || req.from_seq() <= 2) break;
    to = req.from_seq() - 1;
  }
  if (progress.last_tick) progress.due_after_unix_ms = progress.last_tick->tick_unix_ms();
  if (resumed) progress.due_after_unix_ms = std::max(progress.due_after_unix_ms, *resumed);
  return progress;
}

Status ScheduleRecords::Append(const ScheduleRecord& record, uint64_t epoch, std::vector<v1::Event> events) {
  v1::AppendRequest req;
  req.set_session_id(record.id);
  req.set_expected_next_seq(record.next_seq);
  req.set_lease_epoch(epoch);
  for (auto& ev : events) *req.add_events() = std::move(ev);
  return store_->Append(req).status();
}

Result<ScheduleRecords::Page> ScheduleRecords::List(const std::string& tenant, uint32_t limit,
                                                    const std::string& page_token) {
  v1::ListSessionsRequest req;
  req.set_tenant(RecordTenant(tenant));
  req.set_page_size(limit);
  req.set_page_token(page_token);
  SINEW_ASSIGN_OR_RETURN(v1::ListSessionsResponse resp, store_->ListSessions(req));
  Page page;
  for (const auto& s : resp.sessions()) {
    auto record = FromSession(s);
    if (record && record->state != "deleted") page.records.push_back(std::move(*record));
  }
  page.next_page_token = resp.next_page_token();
  return page;
}

}  // namespace sinew::harness
