#include "cron.h"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <stdexcept>

namespace sinew::harness {
namespace {

constexpr int64_t kDaySeconds = 86400;
// The Gregorian calendar repeats every 400 years, weekdays included.
constexpr int64_t kCycleDays = 146097;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
    if (next == std::string_view::npos) return out;
    pos = next + 1;
  }
}

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const std::array<const char*, 12>* names;  // names[i] is min + i; null: numbers only
};

constexpr std::array<const char*, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                     "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<const char*, 12> kWeekdayNames = {"sun", "mon", "tue", "wed", "thu", "fri",
                                                       "sat", nullptr, nullptr, nullptr, nullptr, nullptr};

Result<int> ParseValue(std::string_view text, const FieldSpec& spec) {
  const std::string lower = Lower(text);
  if (spec.names != nullptr) {
    for (size_t i = 0; i < spec.names->size(); ++i) {
      if ((*spec.names)[i] != nullptr && lower == (*spec.names)[i]) return spec.min + static_cast<int>(i);
    }
  }
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Status::InvalidArgument("cron " + std::string(spec.name) + " field: '" + std::string(text) +
                                   "' is not a number" + (spec.names != nullptr ? " or a name" : ""));
  }
  if (v < spec.min || v > spec.max) {
    return Status::InvalidArgument("cron " + std::string(spec.name) + " field: " + std::to_string(v) +
                                   " is outside " + std::to_string(spec.min) + "-" + std::to_string(spec.max));
  }
  return v;
}

// Sets the bits of one field's values (bit v for value v); *star when it starts with '*'.
template <size_t N>
Status ParseField(std::string_view text, const FieldSpec& spec, std::bitset<N>* bits, bool* star) {
  *star = !text.empty() && text[0] == '*';
  for (std::string_view item : Split(text, ',')) {
    if (item.empty()) return Status::InvalidArgument("cron " + std::string(spec.name) + " field: an empty list item");
    int step = 1;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      std::string_view step_text = item.substr(slash + 1);
      auto [ptr, ec] = std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
      if (step_text.empty() || ec != std::errc() || ptr != step_text.data() + step_text.size() || step < 1 ||
          step > spec.max - spec.min + 1) {
        return Status::InvalidArgument("cron " + std::string(spec.name) + " field: step '" + std::string(step_text) +
                                       "' must be a number from 1 to " + std::to_string(spec.max - spec.min + 1));
      }
      item = item.substr(0, slash);
    }
    int lo = spec.min;
    int hi = spec.max;
    if (item != "*") {
      size_t dash = item.find('-');
      SINEW_ASSIGN_OR_RETURN(lo, ParseValue(item.substr(0, dash), spec));
      if (dash != std::string_view::npos) {
        SINEW_ASSIGN_OR_RETURN(hi, ParseValue(item.substr(dash + 1), spec));
        if (hi < lo) {
          return Status::InvalidArgument("cron " + std::string(spec.name) + " field: range '" + std::string(item) +
                                         "' ends before it starts");
        }
      } else if (step == 1) {
        hi = lo;  // a single value; "a/n" runs from a to the field's end
      }
    }
    for (int v = lo; v <= hi; v += step) bits->set(static_cast<size_t>(v));
  }
  return Status::Ok();
}

// The five-field form of a macro, or "" when `expression` is not one.
std::string_view Macro(std::string_view expression) {
  static constexpr std::pair<std::string_view, std::string_view> kMacros[] = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"}};
  for (const auto& [name, fields] : kMacros) {
    if (expression == name) return fields;
  }
  return "";
}

bool ValidZoneName(std::string_view zone) {
  if (zone.empty() || zone.size() > 64 || zone.front() == '/' || zone.find("..") != std::string_view::npos) {
    return false;
  }
  return std::all_of(zone.begin(), zone.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' || c == '+';
  });
}

}  // namespace

Result<CronSchedule> CronSchedule::Parse(std::string_view expression, std::string_view zone) {
  CronSchedule s;
  if (!ValidZoneName(zone)) {
    return Status::InvalidArgument("timezone '" + std::string(zone.substr(0, 64)) +
                                   "' is not an IANA time zone name (such as Europe/Berlin or UTC)");
  }
  try {
    s.zone_ = date::locate_zone(zone);
  } catch (const std::exception&) {
    return Status::InvalidArgument("timezone '" + std::string(zone) + "' is not a time zone this host knows");
  }
  s.zone_name_ = std::string(zone);

  std::string_view text = expression;
  if (!text.empty() && text[0] == '@') {
    text = Macro(expression);
    if (text.empty()) {
      return Status::InvalidArgument("cron '" + std::string(expression.substr(0, 32)) +
                                     "' is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly");
    }
  }
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    size_t end = pos;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t') ++end;
    if (end > pos) fields.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return Status::InvalidArgument("cron must have 5 fields (minute hour day-of-month month day-of-week) or 6 "
                                   "(seconds first); got " + std::to_string(fields.size()));
  }
  bool unused_star = false;
  if (fields.size() == 6) {
    SINEW_RETURN_IF_ERROR(ParseField(fields[0], {"seconds", 0, 59, nullptr}, &s.seconds_, &unused_star));
    fields.erase(fields.begin());
  } else {
    s.seconds_.set(0);
  }
  SINEW_RETURN_IF_ERROR(ParseField(fields[0], {"minute", 0, 59, nullptr}, &s.minutes_, &unused_star));
  SINEW_RETURN_IF_ERROR(ParseField(fields[1], {"hour", 0, 23, nullptr}, &s.hours_, &unused_star));
  SINEW_RETURN_IF_ERROR(
      ParseField(fields[2], {"day-of-month", 1, 31, nullptr}, &s.days_of_month_, &s.day_of_month_star_));
  SINEW_RETURN_IF_ERROR(ParseField(fields[3], {"month", 1, 12, &kMonthNames}, &s.months_, &unused_star));
  std::bitset<8> weekdays;
  SINEW_RETURN_IF_ERROR(ParseField(fields[4], {"day-of-week", 0, 7, &kWeekdayNames}, &weekdays, &s.weekday_star_));
  for (size_t d = 0; d < 7; ++d) s.weekdays_[d] = weekdays[d];
  if (weekdays[7]) s.weekdays_.set(0);
  SINEW_RETURN_IF_ERROR(s.Analyze());
  return s;
}

bool CronSchedule::DayMatches(unsigned month, unsigned day_of_month, unsigned weekday) const {
  if (!months_[month]) return false;
  const bool dom = days_of_month_[day_of_month];
  const bool dow = weekdays_[weekday];
  if (day_of_month_star_ || weekday_star_) return dom && dow;
  return dom || dow;
}

Status CronSchedule::Analyze() {
  for (size_t h = 0; h < 24; ++h) {
    if (!hours_[h]) continue;
    for (size_t m = 0; m < 60; ++m) {
      if (!minutes_[m]) continue;
      for (size_t sec = 0; sec < 60; ++sec) {
        if (seconds_[sec]) fire_seconds_of_day_.push_back(static_cast<int32_t>(h * 3600 + m * 60 + sec));
      }
    }
  }
  // The shortest gap between two matching days over one whole calendar cycle (and from its
  // last matching day round to its first), a month at a time.
  int64_t first = -1, previous = -1, min_day_gap = kCycleDays, index = 0;
  for (int y = 2000; y < 2400; ++y) {
    for (unsigned m = 1; m <= 12; ++m) {
      const date::year_month_day_last last{date::year{y} / date::month{m} / date::last};
      const auto days_in_month = static_cast<int64_t>(static_cast<unsigned>(last.day()));
      if (!months_[m]) {
        index += days_in_month;
        continue;
      }
      unsigned weekday = date::weekday(date::sys_days(date::year{y} / date::month{m} / 1)).c_encoding();
      for (int64_t d = 1; d <= days_in_month; ++d, ++index, weekday = (weekday + 1) % 7) {
        if (!DayMatches(m, static_cast<unsigned>(d), weekday)) continue;
        if (first < 0) first = index;
        if (previous >= 0) min_day_gap = std::min(min_day_gap, index - previous);
        previous = index;
      }
    }
  }
  if (first < 0) {
    return Status::InvalidArgument("cron never fires: no date matches its day-of-month, month and day-of-week");
  }
  min_day_gap = std::min(min_day_gap, first + kCycleDays - previous);
  int64_t gap = min_day_gap * kDaySeconds - fire_seconds_of_day_.back() + fire_seconds_of_day_.front();
  for (size_t i = 1; i < fire_seconds_of_day_.size(); ++i) {
    gap = std::min<int64_t>(gap, fire_seconds_of_day_[i] - fire_seconds_of_day_[i - 1]);
  }
  min_interval_s_ = gap;
  return Status::Ok();
}

int64_t CronSchedule::NextLocalAtOrAfter(int64_t local_s) const {
  int64_t day = local_s >= 0 ? local_s / kDaySeconds : (local_s - kDaySeconds + 1) / kDaySeconds;
  int64_t time_of_day = local_s - day * kDaySeconds;
  // Analyze() found a matching day in every calendar cycle: this ends within one.
  for (int64_t i = 0; i <= kCycleDays; ++i, ++day, time_of_day = 0) {
    const date::sys_days d{date::days{static_cast<int>(day)}};
    const date::year_month_day ymd(d);
    if (!DayMatches(static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                    date::weekday(d).c_encoding())) {
      continue;
    }
    auto it = std::lower_bound(fire_seconds_of_day_.begin(), fire_seconds_of_day_.end(), time_of_day);
    if (it != fire_seconds_of_day_.end()) return day * kDaySeconds + *it;
  }
  return local_s;  // unreachable
}

int64_t CronSchedule::NextAfter(int64_t after_unix_s) const {
  using std::chrono::seconds;
  const date::sys_seconds after{seconds{after_unix_s}};
  int64_t local = zone_->to_local(after).time_since_epoch().count();
  while (true) {
    local = NextLocalAtOrAfter(local);
    const date::local_seconds wall{seconds{local}};
    const date::local_info info = zone_->get_info(wall);
    date::sys_seconds instant;
    if (info.result == date::local_info::nonexistent) {
      instant = info.second.begin;  // the first instant after the gap
    } else {
      instant = date::sys_seconds{wall.time_since_epoch()} - info.first.offset;  // ambiguous: the first
    }
    if (instant > after) return instant.time_since_epoch().count();
    ++local;
  }
}

}  // namespace sinew::harness
