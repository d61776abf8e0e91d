#include "json_util.h"

#include <chrono>

namespace sinew::harness {

namespace json = boost::json;

v1::SessionStatus StatusFromName(std::string_view name) {
  for (int s = v1::SESSION_STATUS_QUEUED; s <= v1::SESSION_STATUS_REQUIRES_ACTION; ++s) {
    auto status = static_cast<v1::SessionStatus>(s);
    if (store::SessionStatusName(status) == name) return status;
  }
  return v1::SESSION_STATUS_UNSPECIFIED;
}

bool IsTerminal(v1::SessionStatus status) {
  return status == v1::SESSION_STATUS_COMPLETED || status == v1::SESSION_STATUS_FAILED ||
         status == v1::SESSION_STATUS_CANCELLED;
}

json::object SessionToJson(const v1::Session& s) {
  json::object o;
  o["id"] = s.id();
  o["tenant"] = s.tenant();
  o["title"] = s.title();
  o["status"] = store::SessionStatusName(s.status());
  o["created_unix_ms"] = s.created_unix_ms();
  o["updated_unix_ms"] = s.updated_unix_ms();
  o["next_seq"] = s.next_seq();
  json::object meta;
  for (const auto& [k, v] : s.metadata()) meta[k] = v;
  o["metadata"] = std::move(meta);
  o["forked_from_session"] = s.forked_from_session();
  o["forked_at_seq"] = s.forked_at_seq();
  // A sub-agent names its parent and the parent's delegate call.
  if (!s.parent_session_id().empty()) {
    o["parent_session_id"] = s.parent_session_id();
    o["parent_call_id"] = s.parent_call_id();
  }
  return o;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace sinew::harness
