// CronSchedule: parsing, refusals, next fire times across month ends, leap years and the
// daylight-saving changes of a real zone (the host's zoneinfo).
#include "cron.h"

#include <date/date.h>
#include <gtest/gtest.h>

namespace sinew::harness {
namespace {

int64_t Utc(int y, unsigned mo, unsigned d, int h, int mi, int s = 0) {
  const date::sys_days day = date::year{y} / mo / d;
  return static_cast<int64_t>(day.time_since_epoch().count()) * 86400 + h * 3600 + mi * 60 + s;
}

CronSchedule Must(const char* expr, const char* zone = "UTC") {
  auto c = CronSchedule::Parse(expr, zone);
  EXPECT_TRUE(c.ok()) << expr << ": " << c.status().message();
  return std::move(c).value();
}

TEST(CronTest, EveryMinuteFiresAtTheNextWholeMinute) {
  auto c = Must("* * * * *");
  EXPECT_EQ(c.NextAfter(Utc(2026, 5, 1, 12, 0, 30)), Utc(2026, 5, 1, 12, 1));
  EXPECT_EQ(c.NextAfter(Utc(2026, 5, 1, 12, 1)), Utc(2026, 5, 1, 12, 2));  // strictly after
  EXPECT_EQ(c.MinIntervalSeconds(), 60);
}

TEST(CronTest, DayOfMonth31SkipsShortMonths) {
  auto c = Must("0 0 31 * *");
  EXPECT_EQ(c.NextAfter(Utc(2026, 4, 1, 0, 0)), Utc(2026, 5, 31, 0, 0));
  EXPECT_EQ(c.NextAfter(Utc(2026, 12, 31, 0, 0)), Utc(2027, 1, 31, 0, 0));
}

TEST(CronTest, February29FiresInLeapYearsOnly) {
  auto c = Must("0 12 29 2 *");
  EXPECT_EQ(c.NextAfter(Utc(2025, 3, 1, 0, 0)), Utc(2028, 2, 29, 12, 0));
  // 2100 is not a leap year: the next after 2096 is 2104.
  EXPECT_EQ(c.NextAfter(Utc(2096, 3, 1, 0, 0)), Utc(2104, 2, 29, 12, 0));
}

TEST(CronTest, NamesRangesListsAndSteps) {
  auto c = Must("15,45 9-17/4 * jan-MAR Mon-fri");  // 09, 13, 17 h; weekdays of Q1
  // Friday 2027-01-01, 09:15.
  EXPECT_EQ(c.NextAfter(Utc(2026, 12, 31, 23, 0)), Utc(2027, 1, 1, 9, 15));
  EXPECT_EQ(c.NextAfter(Utc(2027, 1, 1, 9, 15)), Utc(2027, 1, 1, 9, 45));
  EXPECT_EQ(c.NextAfter(Utc(2027, 1, 1, 9, 45)), Utc(2027, 1, 1, 13, 15));
  // After Friday 17:45 comes Monday 2027-01-04.
  EXPECT_EQ(c.NextAfter(Utc(2027, 1, 1, 17, 45)), Utc(2027, 1, 4, 9, 15));
  // After March comes next January.
  EXPECT_EQ(c.NextAfter(Utc(2027, 3, 31, 18, 0)), Utc(2028, 1, 3, 9, 15));
  auto sunday = Must("0 0 * * 7");  // 7 is Sunday, like 0
  EXPECT_EQ(sunday.NextAfter(Utc(2026, 12, 1, 0, 0)), Utc(2026, 12, 6, 0, 0));
  auto from = Must("50/5 * * * *");  // a/n: from a to the end of the field
  EXPECT_EQ(from.NextAfter(Utc(2026, 1, 1, 0, 51)), Utc(2026, 1, 1, 0, 55));
  EXPECT_EQ(from.NextAfter(Utc(2026, 1, 1, 0, 55)), Utc(2026, 1, 1, 1, 50));
}

TEST(CronTest, DayOfMonthOrDayOfWeekWhenBothAreRestricted) {
  auto either = Must("0 0 13 * fri");
  // 2026-02-06 is a Friday, 2026-02-13 both, 2026-02-20 a Friday.
  EXPECT_EQ(either.NextAfter(Utc(2026, 2, 1, 0, 0)), Utc(2026, 2, 6, 0, 0));
  EXPECT_EQ(either.NextAfter(Utc(2026, 3, 7, 0, 0)), Utc(2026, 3, 13, 0, 0));  // a Friday too
  EXPECT_EQ(either.NextAfter(Utc(2026, 4, 11, 0, 0)), Utc(2026, 4, 13, 0, 0));  // a Monday
  auto both = Must("0 0 */2 * fri");  // '*' first: both must match
  // Odd days that are Fridays: 2026-02-13 is one; 02-06 is even.
  EXPECT_EQ(both.NextAfter(Utc(2026, 2, 1, 0, 0)), Utc(2026, 2, 13, 0, 0));
}

TEST(CronTest, MacrosStandForTheirFiveFieldForms) {
  EXPECT_EQ(Must("@hourly").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2026, 1, 1, 11, 0));
  EXPECT_EQ(Must("@daily").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2026, 1, 2, 0, 0));
  EXPECT_EQ(Must("@midnight").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2026, 1, 2, 0, 0));
  EXPECT_EQ(Must("@weekly").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2026, 1, 4, 0, 0));  // Sunday
  EXPECT_EQ(Must("@monthly").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2026, 2, 1, 0, 0));
  EXPECT_EQ(Must("@yearly").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2027, 1, 1, 0, 0));
  EXPECT_EQ(Must("@annually").NextAfter(Utc(2026, 1, 1, 10, 1)), Utc(2027, 1, 1, 0, 0));
}

TEST(CronTest, SixFieldsReadTheFirstAsSeconds) {
  auto c = Must("*/20 * * * * *");
  EXPECT_EQ(c.NextAfter(Utc(2026, 1, 1, 0, 0, 5)), Utc(2026, 1, 1, 0, 0, 20));
  EXPECT_EQ(c.NextAfter(Utc(2026, 1, 1, 0, 0, 40)), Utc(2026, 1, 1, 0, 1, 0));
  EXPECT_EQ(c.MinIntervalSeconds(), 20);
}

TEST(CronTest, MinimumIntervalIsTheShortestGapBetweenFires) {
  EXPECT_EQ(Must("*/15 * * * *").MinIntervalSeconds(), 900);
  EXPECT_EQ(Must("0 9,10 * * *").MinIntervalSeconds(), 3600);
  // 23:00 then 00:00 the next day.
  EXPECT_EQ(Must("0 0,23 * * *").MinIntervalSeconds(), 3600);
  EXPECT_EQ(Must("0 0 * * *").MinIntervalSeconds(), 86400);
  EXPECT_EQ(Must("0 0 1 1 *").MinIntervalSeconds(), 365 * 86400);
  EXPECT_EQ(Must("* * * * * *").MinIntervalSeconds(), 1);
  EXPECT_EQ(Must("0,1 0 0 1 1 *").MinIntervalSeconds(), 1);  // a burst once a year counts
}

TEST(CronTest, InZoneFiresAtLocalWallClockTime) {
  auto c = Must("0 9 * * *", "America/New_York");
  EXPECT_EQ(c.NextAfter(Utc(2026, 1, 15, 0, 0)), Utc(2026, 1, 15, 14, 0));  // EST, UTC-5
  EXPECT_EQ(c.NextAfter(Utc(2026, 7, 15, 0, 0)), Utc(2026, 7, 15, 13, 0));  // EDT, UTC-4
  EXPECT_EQ(c.zone_name(), "America/New_York");
}

// Europe/Berlin: on 2026-03-29 02:00 CET becomes 03:00 CEST (01:00 UTC); on 2026-10-25
// 03:00 CEST becomes 02:00 CET (01:00 UTC), so 02:00-03:00 happens twice.
TEST(CronTest, WallClockTimeSkippedBySpringForwardFiresAfterTheGap) {
  auto c = Must("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(c.NextAfter(Utc(2026, 3, 27, 12, 0)), Utc(2026, 3, 28, 1, 30));   // 02:30 CET
  EXPECT_EQ(c.NextAfter(Utc(2026, 3, 28, 1, 30)), Utc(2026, 3, 29, 1, 0));    // 03:00 CEST
  EXPECT_EQ(c.NextAfter(Utc(2026, 3, 29, 1, 0)), Utc(2026, 3, 30, 0, 30));    // 02:30 CEST
  // Two wall-clock times in the gap (02:00 and 02:30) fire once, after it.
  auto half = Must("*/30 * * * *", "Europe/Berlin");
  EXPECT_EQ(half.NextAfter(Utc(2026, 3, 29, 0, 30)), Utc(2026, 3, 29, 1, 0));
  EXPECT_EQ(half.NextAfter(Utc(2026, 3, 29, 1, 0)), Utc(2026, 3, 29, 1, 30));  // 03:30 CEST
}

TEST(CronTest, WallClockTimeRepeatedByFallBackFiresOnce) {
  auto c = Must("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(c.NextAfter(Utc(2026, 10, 24, 12, 0)), Utc(2026, 10, 25, 0, 30));  // 02:30 CEST
  EXPECT_EQ(c.NextAfter(Utc(2026, 10, 25, 0, 30)), Utc(2026, 10, 26, 1, 30));  // not 02:30 CET
  auto every = Must("*/20 * * * *", "Europe/Berlin");
  // 02:40 CEST (00:40 UTC), then 03:00 CET (02:00 UTC): the repeated 02:00-02:40 CET is skipped.
  EXPECT_EQ(every.NextAfter(Utc(2026, 10, 25, 0, 40)), Utc(2026, 10, 25, 2, 0));
}

TEST(CronTest, ExpressionsThatNeverFireAreRefused) {
  for (const char* never : {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"}) {
    auto c = CronSchedule::Parse(never, "UTC");
    ASSERT_FALSE(c.ok()) << never;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("never fires"), std::string::npos) << c.status().message();
  }
  // Restricted day-of-week makes day-of-month optional: this fires every Monday.
  EXPECT_TRUE(CronSchedule::Parse("0 0 30 2 mon", "UTC").ok());
}

TEST(CronTest, MalformedExpressionsAndZonesAreRefusedWithTheirField) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "5 fields"},
      {"* * * *", "5 fields"},
      {"* * * * * * *", "5 fields"},
      {"60 * * * *", "minute"},
      {"* 24 * * *", "hour"},
      {"* * 0 * *", "day-of-month"},
      {"* * * 13 *", "month"},
      {"* * * * 8", "day-of-week"},
      {"*/0 * * * *", "step"},
      {"30-10 * * * *", "ends before"},
      {"a * * * *", "minute"},
      {"1,,2 * * * *", "empty"},
      {"* * * foo *", "month"},
      {"@reboot", "@yearly"},
      {"-1 * * * *", "minute"},
  };
  for (const auto& [expr, says] : bad) {
    auto c = CronSchedule::Parse(expr, "UTC");
    ASSERT_FALSE(c.ok()) << "'" << expr << "'";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(says), std::string::npos) << expr << ": " << c.status().message();
  }
  for (const char* zone : {"Mars/Olympus", "", "../../etc/passwd", "/usr/share/zoneinfo/UTC", "Europe/Berlin\n"}) {
    auto c = CronSchedule::Parse("* * * * *", zone);
    ASSERT_FALSE(c.ok()) << zone;
    EXPECT_NE(c.status().message().find("timezone"), std::string::npos);
  }
}

}  // namespace
}  // namespace sinew::harness
