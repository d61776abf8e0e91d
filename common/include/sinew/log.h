// One logging setup for every Sinew process (spdlog): plain text for people or JSON lines
// for machines, each line carrying the current thread's structured fields (sinew/trace.h:
// session, seq, trace_id, span_id and any extra ones). See docs/logging.md.
//
// JSON line: {"ts":"2026-12-01T06:16:47.123Z","level":"info","component":"sinew-harness",
//   "pid":123,"msg":"...","session":"...","seq":7,"trace_id":"...","span_id":"...",...}
// Absent fields are left out. Every string is valid UTF-8 whatever bytes were logged
// (invalid sequences become U+FFFD) and control characters are escaped, so each line
// parses as one JSON object.
//
// Thread-safety: SetupLogging once at start, before other threads log. The formatters
// read the thread-local fields of the thread that logs, so loggers must stay synchronous
// (spdlog's default; an async logger would format on its own thread and lose them).
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

#include "sinew/status.h"

namespace sinew::logging {

enum class LogFormat { kText, kJson };

// "text" or "json"; anything else is kInvalidArgument naming both.
Result<LogFormat> ParseLogFormat(std::string_view name);

// The formatter of `format` for process `component` (e.g. "sinew-harness"). Text lines
// are spdlog's default ("[ts] [level] msg") followed by " key=value" for each field.
std::unique_ptr<spdlog::formatter> MakeFormatter(LogFormat format, std::string component);

// Sets the default logger's formatter and level. `format`: "text" | "json"; `level`:
// trace, debug, info, warn, error, critical or off. Errors: kInvalidArgument (and nothing
// changes) for an unknown format or level.
[[nodiscard]] Status SetupLogging(std::string_view component, std::string_view format,
                                  std::string_view level);

}  // namespace sinew::logging
