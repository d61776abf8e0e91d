// ScheduleRecords: the durable record of each schedule made through /v1/schedules
// (docs/harness.md, "Schedules"), kept in the session store so that every harness replica
// answers for, and may tick, every schedule.
//
// A record is a session of the store under a tenant name of its own (RecordTenant: the
// caller's tenant behind a prefix no API key's tenant has): the session API does not see
// it, and the harness's scanner leaves it alone (IsRecordTenant). Its metadata holds what
// never changes (cron, timezone, missed policy, the task template); its status holds the
// state: running = active, waiting_for_input = paused, cancelled = deleted. Its log holds
// the state changes (status_change) and the ticks (schedule_tick). Its lease is the
// schedule's: whoever ticks it or changes its state holds it meanwhile.
//
// Thread-safety: every method may be called from many threads at once.
// Errors: the store's, unchanged; nothing is written on error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sinew/session_store/session_store.h"
#include "sinew/status.h"

namespace sinew::harness {

struct ScheduleRecord {
  std::string id;        // the API's id: the record's session id (32 hex digits)
  std::string tenant;    // the caller's tenant (not the record's store tenant)
  std::string state;     // "active", "paused", "deleted"
  std::string cron;
  std::string timezone;
  std::string missed;     // "skip" or "run_once"
  std::string task_json;  // the task template, a JSON object as POST /v1/sessions takes
  int64_t created_unix_ms = 0;
  uint64_t next_seq = 0;  // of the record's log, as read
};

// What the log says about ticks: the last tick event, and the time from which fire times
// are due (the last tick's time, or a later resume, or the creation).
struct ScheduleProgress {
  std::optional<v1::ScheduleTick> last_tick;
  int64_t due_after_unix_ms = 0;
};

class ScheduleRecords {
 public:
  // `store` is not owned and outlives this.
  explicit ScheduleRecords(store::SessionStore* store) : store_(store) {}

  // The store tenant that holds `tenant`'s records.
  static std::string RecordTenant(const std::string& tenant);
  // True for a store tenant that holds records (schedules, sandboxes), not sessions.
  static bool IsRecordTenant(const std::string& store_tenant);
  // The caller's tenant of a schedule record's store tenant; nullopt for anything else.
  static std::optional<std::string> TenantOfScheduleRecord(const std::string& store_tenant);

  // The session id of tick `tick_unix_ms` of schedule `schedule_id`: the store's id layout
  // with the tick's time, the rest a hash of both (the same in every harness).
  static std::string TickSessionId(const std::string& schedule_id, int64_t tick_unix_ms);

  [[nodiscard]] Result<ScheduleRecord> Create(const std::string& tenant, const ScheduleRecord& schedule,
                                              bool paused);
  // The schedule `id` of `tenant`; kNotFound for a malformed id, an unknown or deleted one,
  // or another tenant's (indistinguishable).
  [[nodiscard]] Result<ScheduleRecord> Get(const std::string& id, const std::string& tenant);
  // The schedule of a store session (a listing's), or nullopt when it is not one.
  static std::optional<ScheduleRecord> FromSession(const v1::Session& s);

  // Reads the log of `record` back from its end until its last tick.
  [[nodiscard]] Result<ScheduleProgress> Progress(const ScheduleRecord& record);

  // Appends `events` after event next_seq - 1 of `record` under the lease `epoch`.
  // kFailedPrecondition / kAborted when the log moved on or the lease was lost.
  [[nodiscard]] Status Append(const ScheduleRecord& record, uint64_t epoch, std::vector<v1::Event> events);

  struct Page {
    std::vector<ScheduleRecord> records;  // newest first, deleted ones left out
    std::string next_page_token;          // "" at the end
  };
  // One page of `tenant`'s schedules, newest first (a page may hold fewer than `limit`).
  [[nodiscard]] Result<Page> List(const std::string& tenant, uint32_t limit, const std::string& page_token);

 private:
  store::SessionStore* const store_;  // not owned
};

// "active", "paused", "deleted" for a record's status.
std::string ScheduleStateOf(v1::SessionStatus status);

}  // namespace sinew::harness
