#include "api_sandbox_json.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

std::string OutcomeName(v1::SandboxOutcome outcome) {
  switch (outcome) {
    case v1::SANDBOX_OUTCOME_DESTROYED:
      return "destroyed";
    case v1::SANDBOX_OUTCOME_EXITED:
      return "exited";
    case v1::SANDBOX_OUTCOME_OOM:
      return "oom";
    case v1::SANDBOX_OUTCOME_LIFETIME:
      return "lifetime";
    case v1::SANDBOX_OUTCOME_LOST:
      return "lost";
    case v1::SANDBOX_OUTCOME_UNCLAIMED:
      return "unclaimed";
    default:
      return "";
  }
}

std::string StateName(v1::SandboxState state) {
  switch (state) {
    case v1::SANDBOX_STATE_STARTING:
      return "starting";
    case v1::SANDBOX_STATE_READY:
      return "ready";
    case v1::SANDBOX_STATE_PAUSED:
      return "paused";
    case v1::SANDBOX_STATE_ENDED:
      return "ended";
    default:
      return "unknown";
  }
}

}  // namespace

bool IsSnapshotId(std::string_view id) {
  if (id.size() != 37 || id.substr(0, 5) != "snap-") return false;
  for (char c : id.substr(5)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

json::object ResourcesToJson(const v1::Resources& r) {
  return json::object{{"cpu_millis", r.cpu_millicores()},
                      {"memory_bytes", r.memory_guaranteed_bytes()},
                      {"memory_limit_bytes", r.memory_limit_bytes()},
                      {"pids", r.pids_limit()},
                      {"disk_bytes", r.workspace_bytes()},
                      {"lifetime_seconds", r.lifetime_seconds()},
                      {"network", r.network()},
                      {"image", r.image()},
                      {"runtime", r.runtime()}};
}

json::object SandboxToJson(const SandboxRecord& record) {
  json::object out{{"id", record.id},
                   {"state", record.state},
                   {"created_unix_ms", record.created_unix_ms},
                   {"updated_unix_ms", record.updated_unix_ms}};
  boost::system::error_code ec;
  json::value resources = json::parse(record.resources_json, ec);
  out["resources"] = !ec && resources.is_object() ? resources.as_object() : json::object{};
  if (!record.host_id.empty()) out["host_id"] = record.host_id;
  if (!record.from_snapshot.empty()) out["from_snapshot"] = record.from_snapshot;
  if (!record.reason.empty()) out["reason"] = record.reason;
  return out;
}

json::object LiveToJson(const v1::SandboxInfo& info) {
  json::object out{{"state", StateName(info.state())},
                   {"memory_peak_bytes", info.memory_peak_bytes()},
                   {"cpu_usage_ns", info.cpu_usage_ns()},
                   {"resumes", info.resumes()}};
  if (info.state() == v1::SANDBOX_STATE_ENDED) {
    out["outcome"] = OutcomeName(info.outcome());
    out["outcome_detail"] = info.outcome_detail();
  }
  return out;
}

std::string OutcomeText(const v1::SandboxInfo& info) {
  std::string text = "ended: " + OutcomeName(info.outcome());
  if (!info.outcome_detail().empty()) text += " (" + info.outcome_detail() + ")";
  return text;
}

json::object SnapshotToJson(const v1::SnapshotInfo& s, const std::string& source_id) {
  json::object out{{"id", s.id()},
                   {"source_sandbox", source_id},
                   {"created_unix_ms", s.created_unix_ms()},
                   {"logical_bytes", s.logical_bytes()},
                   {"data_bytes", s.data_bytes()},
                   {"added_bytes", s.added_bytes()},
                   {"entries", s.entries()},
                   {"duration_ms", s.duration_ms()}};
  if (!s.host().empty()) out["host"] = s.host();
  return out;
}

json::object ExecuteResultToJson(const v1::ExecuteResult& r) {
  return json::object{{"output", r.output()},           {"is_error", r.is_error()},
                      {"exit_code", r.exit_code()},     {"signal", r.signal()},
                      {"truncated", r.truncated()},     {"timed_out", r.timed_out()},
                      {"duration_ms", r.duration_ms()}, {"replayed", r.replayed()}};
}

}  // namespace sinew::harness
