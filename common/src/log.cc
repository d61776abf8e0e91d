#include "sinew/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <time.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>

#include "sinew/trace.h"
#include "sinew/utf8.h"

namespace sinew::logging {
namespace {

std::string_view ToView(spdlog::string_view_t s) { return {s.data(), s.size()}; }

// "2026-12-01T06:16:47.123Z": RFC 3339, UTC, milliseconds.
std::string Rfc3339Ms(spdlog::log_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string component) : component_(std::move(component)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    boost::json::object line;
    line["ts"] = Rfc3339Ms(msg.time);
    line["level"] = SanitizeUtf8(ToView(spdlog::level::to_string_view(msg.level)));
    line["component"] = SanitizeUtf8(component_);
    line["pid"] = static_cast<int64_t>(::getpid());
    line["msg"] = SanitizeUtf8(ToView(msg.payload));
    const LogFields& f = CurrentLogFields();
    if (!f.session.empty()) line["session"] = SanitizeUtf8(f.session);
    if (f.seq != 0) line["seq"] = f.seq;
    if (!f.trace_id.empty()) line["trace_id"] = SanitizeUtf8(f.trace_id);
    if (!f.span_id.empty()) line["span_id"] = SanitizeUtf8(f.span_id);
    for (const auto& [key, value] : f.extra) {
      const std::string k = SanitizeUtf8(key);
      if (!line.contains(k)) line[k] = SanitizeUtf8(value);  // the fixed fields win
    }
    const std::string text = boost::json::serialize(line);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(component_);
  }

 private:
  const std::string component_;
};

// %* in a text pattern: " session=... seq=... trace_id=..." for the fields present.
class FieldsFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    const LogFields& f = CurrentLogFields();
    auto add = [&dest](std::string_view key, std::string_view value) {
      dest.push_back(' ');
      dest.append(key.data(), key.data() + key.size());
      dest.push_back('=');
      dest.append(value.data(), value.data() + value.size());
    };
    if (!f.session.empty()) add("session", f.session);
    if (f.seq != 0) add("seq", std::to_string(f.seq));
    if (!f.trace_id.empty()) add("trace_id", f.trace_id);
    if (!f.span_id.empty()) add("span_id", f.span_id);
    for (const auto& [key, value] : f.extra) add(key, value);
  }

  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<FieldsFlag>(); }
};

}  // namespace

Result<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return Status::InvalidArgument("log format '" + SanitizeUtf8(name.substr(0, 64)) +
                                 "' is not one of: text, json");
}

std::unique_ptr<spdlog::formatter> MakeFormatter(LogFormat format, std::string component) {
  if (format == LogFormat::kJson) return std::make_unique<JsonFormatter>(std::move(component));
  auto text = std::make_unique<spdlog::pattern_formatter>();
  text->add_flag<FieldsFlag>('*').set_pattern("%+%*");
  return text;
}

Status SetupLogging(std::string_view component, std::string_view format, std::string_view level) {
  SINEW_ASSIGN_OR_RETURN(LogFormat f, ParseLogFormat(format));
  static constexpr std::string_view kLevels[] = {"trace", "debug", "info",     "warn",
                                                 "warning", "error", "critical", "off"};
  bool known = false;
  for (auto l : kLevels) known = known || l == level;
  if (!known) {
    return Status::InvalidArgument("log level '" + SanitizeUtf8(level.substr(0, 64)) +
                                   "' is not one of: trace, debug, info, warn, error, critical, off");
  }
  spdlog::set_formatter(MakeFormatter(f, std::string(component)));
  spdlog::set_level(level == "warning" ? spdlog::level::warn : spdlog::level::from_str(std::string(level)));
  return Status::Ok();
}

}  // namespace sinew::logging
