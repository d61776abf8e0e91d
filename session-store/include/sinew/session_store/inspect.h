// Offline integrity check of a store directory (for `sinew store inspect`).
//
// Opens the directory read-only (a running sinew-store may keep serving it), walks every
// key, and reports each problem with its location instead of stopping at the first.
// Thread-safety: a free function; concurrent calls are independent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::store {

struct IntegrityProblem {
  std::string session_id;  // "" when the problem is not tied to one session
  uint64_t seq = 0;        // 0 when not tied to one event
  std::string kind;        // "gap", "undecodable_event", "metadata_mismatch", "storage", ...
  std::string detail;      // a sentence saying what is wrong
};

struct IntegrityReport {
  uint64_t sessions = 0;
  uint64_t events = 0;
  std::vector<IntegrityProblem> problems;
  bool ok() const { return problems.empty(); }
};

// Returns the report; an error only when the directory cannot be opened at all (not a
// store, missing, or damaged beyond opening — the message says which).
[[nodiscard]] Result<IntegrityReport> InspectStore(const std::string& dir);

}  // namespace sinew::store
