// The logging flags, the same in every Sinew server (docs/logging.md): --log-format text|json
// and --log-level. Pass the parsed values to sinew::logging::SetupLogging.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sinew::logging {

struct LogFlags {
  std::string format = "text";  // text or json (JSON lines)
  std::string level = "info";   // trace, debug, info, warn, error
};

// Adds the flags to `app`, writing into `*flags`, which must outlive the parse.
inline void AddLogFlags(CLI::App& app, LogFlags* flags) {
  app.add_option("--log-format", flags->format, "text or json (JSON lines, docs/logging.md)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", flags->level, "trace, debug, info, warn, error")->capture_default_str();
}

}  // namespace sinew::logging
