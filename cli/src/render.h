// Rendering of sessions and events for people: one line (or a few folded lines) per
// event, tables of sessions. Plain text unless `color` is set (a terminal).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sinew/proto/events.pb.h"

namespace sinew::cli {

struct RenderOptions {
  // ANSI colours. Default: false
  bool color = false;
  // Show tool outputs and model texts whole instead of folded. Default: false
  bool full = false;
  // Lines of a folded output shown before "... N more lines". Default: 3
  size_t fold_lines = 3;
};

// One event as a timeline entry; `t0_ms` is the timestamp times are shown relative to.
std::string RenderEvent(const v1::Event& ev, int64_t t0_ms, const RenderOptions& opts);

struct SessionRow {
  std::string id, status, title;
  int64_t updated_unix_ms = 0;
  uint64_t events = 0;
};

// A table with a header line; plain columns when !color.
std::string RenderSessionTable(const std::vector<SessionRow>& rows, bool color);

// "2026-11-29 21:40:01" in UTC.
std::string FormatTime(int64_t unix_ms);

// True when the session status is final.
bool IsTerminalStatus(v1::SessionStatus status);

}  // namespace sinew::cli
