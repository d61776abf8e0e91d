// The JSON of the sandbox API (docs/harness-openapi.yaml: Sandbox, SandboxLive,
// Snapshot, ExecuteResult). Pure functions of their inputs.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "sandbox_records.h"
#include "sinew/proto/sandbox.pb.h"

namespace sinew::harness {

// Resources in the names of the create body (cpu_millis, memory_bytes, ...).
boost::json::object ResourcesToJson(const v1::Resources& resources);
boost::json::object SandboxToJson(const SandboxRecord& record);
// What sinew-sandboxd says of it now: state, usage and, once ended, how.
boost::json::object LiveToJson(const v1::SandboxInfo& info);
// "oom: memory limit ... reached" for an ended sandbox.
std::string OutcomeText(const v1::SandboxInfo& info);
// `source_id`: the API's id of the sandbox it was taken of ("" when none of the tenant's).
boost::json::object SnapshotToJson(const v1::SnapshotInfo& snapshot, const std::string& source_id);
boost::json::object ExecuteResultToJson(const v1::ExecuteResult& result);
// "snap-" and 32 lower-case hex digits.
bool IsSnapshotId(std::string_view id);

}  // namespace sinew::harness
