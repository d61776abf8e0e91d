#include "scheduler.h"

#include <spdlog/spdlog.h>

#include <set>

namespace sinew::harness {
namespace {

// At most this many missed fire times are counted (a schedule off for years).
constexpr uint32_t kMaxCountedMissed = 100000;

v1::Event TickEvent(const v1::ScheduleTick& tick) {
  v1::Event ev;
  *ev.mutable_schedule_tick() = tick;
  return ev;
}

}  // namespace

Scheduler::Scheduler(const HarnessDeps* deps, CreateTickSession create)
    : deps_(*deps), create_(std::move(create)), records_(deps->store) {}

int64_t Scheduler::grace_ms() const {
  return static_cast<int64_t>(deps_.config->lease_ttl_ms) + 2 * static_cast<int64_t>(deps_.config->scan_interval_ms);
}

Result<int64_t> Scheduler::NextFireMs(const ScheduleRecord& record, const ScheduleProgress& progress, Known* known) {
  if (progress.last_tick && progress.last_tick->outcome() == "pending") return 0;
  if (!known->cron) {
    SINEW_ASSIGN_OR_RETURN(CronSchedule cron, CronSchedule::Parse(record.cron, record.timezone));
    known->cron = std::make_shared<const CronSchedule>(std::move(cron));
  }
  return known->cron->NextAfter(progress.due_after_unix_ms / 1000) * 1000;
}

void Scheduler::RunDue(int64_t now_unix_ms) {
  std::set<std::string> seen;
  v1::ListSessionsRequest req;
  req.set_status(v1::SESSION_STATUS_RUNNING);  // active schedules (and running sessions)
  req.set_page_size(1000);
  req.set_allow_partial(true);
  for (int page = 0; page < 100; ++page) {
    auto resp = deps_.store->ListSessions(req);
    if (!resp.ok()) return;  // the store does not answer: the next pass tries again
    for (const auto& s : resp->sessions()) {
      auto record = ScheduleRecords::FromSession(s);
      if (!record) continue;
      seen.insert(record->id);
      Known& known = known_[record->id];
      if (known.next_seq != record->next_seq || known.next_fire_ms == 0) {
        auto progress = records_.Progress(*record);
        if (!progress.ok()) continue;
        auto next = NextFireMs(*record, *progress, &known);
        if (!next.ok()) {
          spdlog::warn("schedule {}: cannot tick: {}", record->id, next.status().message());
          continue;
        }
        known.next_seq = record->next_seq;
        known.next_fire_ms = *next;
      }
      if (known.next_fire_ms > now_unix_ms) continue;
      Status ticked = Tick(record->id, now_unix_ms);
      if (!ticked.ok()) spdlog::warn("schedule {}: tick not written: {}", record->id, ticked.message());
      known.next_seq = 0;  // read again next pass
    }
    if (resp->next_page_token().empty()) {
      if (resp->unavailable_shards().empty()) std::erase_if(known_, [&](const auto& kv) { return !seen.count(kv.first); });
      break;
    }
    req.set_page_token(resp->next_page_token());
  }
}

Status Scheduler::Tick(const std::string& id, int64_t now_unix_ms) {
  const std::string owner = deps_.owner + "/schedules";
  const auto ttl = std::chrono::milliseconds(deps_.config->lease_ttl_ms);
  auto lease = deps_.store->AcquireLease(id, {owner, deps_.config->advertise_url}, ttl);
  if (!lease.ok()) {
    // Another harness ticks it (or changes its state) now.
    if (lease.status().code() == StatusCode::kFailedPrecondition) return Status::Ok();
    return lease.status();
  }
  auto done = [&](Status s) {
    (void)deps_.store->ReleaseLease(id, owner, lease->epoch());
    return s;
  };
  // Everything from here on is read under the lease.
  auto meta = deps_.store->GetSession(id);
  if (!meta.ok()) return done(meta.status());
  auto record = ScheduleRecords::FromSession(*meta);
  if (!record || record->state != "active") return done(Status::Ok());
  auto progress = records_.Progress(*record);
  if (!progress.ok()) return done(progress.status());
  if (progress->last_tick && progress->last_tick->outcome() == "pending") {
    Status finished = Finish(&*record, lease->epoch(), *progress->last_tick);
    if (!finished.ok()) return done(finished);
    progress = records_.Progress(*record);
    if (!progress.ok()) return done(progress.status());
  }
  auto cron = CronSchedule::Parse(record->cron, record->timezone);
  if (!cron.ok()) return done(cron.status());
  // The due fire times: after the last tick (or resume, or creation), up to now.
  int64_t fire = cron->NextAfter(progress->due_after_unix_ms / 1000);
  if (fire * 1000 > now_unix_ms) return done(Status::Ok());
  uint32_t due = 1;
  for (int64_t next = cron->NextAfter(fire); next * 1000 <= now_unix_ms && due < kMaxCountedMissed;
       next = cron->NextAfter(next)) {
    fire = next;
    ++due;
  }
  v1::ScheduleTick tick;
  tick.set_tick_unix_ms(fire * 1000);
  tick.set_missed(due - 1);
  const bool late = now_unix_ms - fire * 1000 > grace_ms();
  if (late && record->missed == "skip") {
    tick.set_outcome("skipped");
    tick.set_reason("no harness ran this schedule at its fire time");
    Status skipped = records_.Append(*record, lease->epoch(), {TickEvent(tick)});
    if (skipped.ok()) deps_.metrics->Add("sinew_harness_schedule_ticks_total", "outcome=\"skipped\"");
    return done(skipped);
  }
  tick.set_session_id(ScheduleRecords::TickSessionId(id, tick.tick_unix_ms()));
  tick.set_outcome("pending");
  Status pending = records_.Append(*record, lease->epoch(), {TickEvent(tick)});
  if (!pending.ok()) return done(pending);
  ++record->next_seq;
  return done(Finish(&*record, lease->epoch(), tick));
}

Status Scheduler::Finish(ScheduleRecord* record, uint64_t epoch, const v1::ScheduleTick& pending) {
  v1::ScheduleTick tick = pending;
  auto created = create_(*record, tick.tick_unix_ms(), tick.session_id());
  if (created.ok()) {
    tick.set_outcome("created");
  } else if (created.status().code() == StatusCode::kAlreadyExists) {
    // Made before a crash (or by a harness fenced since): it is this tick's if it names it.
    auto existing = deps_.store->GetSession(tick.session_id());
    if (!existing.ok()) return existing.status();
    auto named = existing->metadata().find("schedule_id");
    if (named != existing->metadata().end() && named->second == record->id) {
      tick.set_outcome("created");
    } else {
      tick.set_outcome("refused");
      tick.set_reason("the tick's session id is taken by another session");
      tick.clear_session_id();
    }
  } else if (created.status().code() == StatusCode::kInvalidArgument ||
             created.status().code() == StatusCode::kResourceExhausted) {
    tick.set_outcome("refused");
    tick.set_reason(created.status().message());
    tick.clear_session_id();
  } else {
    return created.status();  // the store: the pending tick stays for the next pass
  }
  SINEW_RETURN_IF_ERROR(records_.Append(*record, epoch, {TickEvent(tick)}));
  ++record->next_seq;
  deps_.metrics->Add("sinew_harness_schedule_ticks_total", "outcome=\"" + tick.outcome() + "\"");
  return Status::Ok();
}

}  // namespace sinew::harness
