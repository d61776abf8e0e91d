// CronSchedule: a cron expression read in an IANA time zone, and the instants it fires at
// (docs/harness.md, "Schedules").
//
// The expression has the five standard fields (minute hour day-of-month month
// day-of-week), or six with a leading seconds field; each field takes *, numbers, ranges
// (a-b), steps (*/n, a-b/n, a/n), lists (a,b-c) and, in month and day-of-week, the names
// JAN..DEC and SUN..SAT (day-of-week 0 and 7 are Sunday). @yearly (@annually), @monthly,
// @weekly, @daily (@midnight) and @hourly stand for their five-field forms. As in Vixie
// cron, a day matches when day-of-month and day-of-week both match, unless neither field
// starts with '*': then either matching is enough.
//
// Time zones: the fields are wall-clock time in the zone. A wall-clock time that does not
// exist there (skipped by a daylight-saving change) fires at the first instant after the
// gap; one that happens twice (a repeated hour) fires once, at its first occurrence.
//
// Thread-safety: a CronSchedule is immutable; every method may be called from many threads.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace date {
class time_zone;
}

namespace sinew::harness {

class CronSchedule {
 public:
  // Parses `expression` in the zone named `zone` ("Europe/Berlin", "UTC").
  // Errors: kInvalidArgument naming the field or the zone, for a malformed expression,
  // an unknown zone, or one that never fires (no day in a 400-year Gregorian cycle matches).
  [[nodiscard]] static Result<CronSchedule> Parse(std::string_view expression, std::string_view zone);

  // The first instant it fires at strictly after `after_unix_s` (unix seconds).
  int64_t NextAfter(int64_t after_unix_s) const;

  // The shortest time between two consecutive fires, in wall-clock seconds, computed as
  // if any two consecutive days could both match (so never longer than the truth).
  int64_t MinIntervalSeconds() const { return min_interval_s_; }

  const std::string& zone_name() const { return zone_name_; }

 private:
  CronSchedule() = default;
  // True when the date matches the day fields (weekday 0 = Sunday).
  bool DayMatches(unsigned month, unsigned day_of_month, unsigned weekday) const;
  // The smallest local time (seconds since the local epoch) at or after `local_s` that
  // matches the fields.
  int64_t NextLocalAtOrAfter(int64_t local_s) const;
  // Fills fire_seconds_of_day_ and min_interval_s_; kInvalidArgument when it never fires.
  [[nodiscard]] Status Analyze();

  std::bitset<60> seconds_, minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;  // 1..31
  std::bitset<13> months_;         // 1..12
  std::bitset<7> weekdays_;        // 0 = Sunday
  bool day_of_month_star_ = false;
  bool weekday_star_ = false;
  std::vector<int32_t> fire_seconds_of_day_;  // ascending: the times of day it fires at
  int64_t min_interval_s_ = 0;
  std::string zone_name_;
  const date::time_zone* zone_ = nullptr;  // the tz database's; lives as long as the process
};

}  // namespace sinew::harness
