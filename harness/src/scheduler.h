// Scheduler: ticks the schedules whose fire time has come (docs/harness.md, "Schedules"),
// each tick once across every harness replica on the store.
//
// Every harness runs one, every scan_interval_ms. A due schedule is ticked under its
// lease (the record's, in the store): the tick is written "pending" (with its session's
// id, a function of the schedule and the tick time) before the session is created, and
// its outcome after; a harness that finds a pending tick last finishes it, and creating
// a session whose id exists already counts as done. So a harness that dies anywhere in a
// tick leaves either nothing (the next one ticks) or a pending tick (the next one
// finishes it), never a second session.
//
// Fire times that passed while no harness ran (or that nobody started within `grace` of
// their time) are missed: with "skip", the last such time is written skipped and the
// schedule goes on from it; with "run_once", one session runs for the last of them. A
// tick on time runs even when earlier ones were missed; the tick says how many.
//
// Thread-safety: RunDue is called from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cron.h"
#include "harness_deps.h"
#include "schedule_records.h"

namespace sinew::harness {

class Scheduler {
 public:
  // Creates the session of one tick (ApiHandler::CreateTickSession's contract).
  using CreateTickSession = std::function<Result<v1::Session>(
      const ScheduleRecord& schedule, int64_t tick_unix_ms, const std::string& session_id)>;

  // `deps` is not owned and outlives this; its owner is set.
  Scheduler(const HarnessDeps* deps, CreateTickSession create);

  // One pass over every active schedule: each one due at `now_unix_ms` is ticked (unless
  // another harness holds its lease).
  void RunDue(int64_t now_unix_ms);

  // How late a tick may start and still count as on time.
  int64_t grace_ms() const;

 private:
  struct Known {
    uint64_t next_seq = 0;         // of the record's log when next_fire_ms was computed
    int64_t next_fire_ms = 0;      // 0: due now (a pending tick)
    std::shared_ptr<const CronSchedule> cron;
  };
  // The next fire time of `record` (0 when a pending tick waits), from its log.
  Result<int64_t> NextFireMs(const ScheduleRecord& record, const ScheduleProgress& progress, Known* known);
  // Ticks `record` under its lease: finishes a pending tick, then writes the due one.
  Status Tick(const std::string& id, int64_t now_unix_ms);
  // Creates the session of pending tick `tick` and writes its outcome after event
  // record->next_seq - 1 (advancing it).
  Status Finish(ScheduleRecord* record, uint64_t epoch, const v1::ScheduleTick& tick);

  const HarnessDeps& deps_;
  const CreateTickSession create_;
  ScheduleRecords records_;
  std::map<std::string, Known> known_;  // by schedule id; RunDue's thread only
};

}  // namespace sinew::harness
