// SandboxApi: the tenant's snapshots (GET /v1/sandboxes/snapshots, DELETE
// /v1/sandboxes/snapshots/{id}) and the snapshot_bytes quota. A snapshot's owner is the
// tenant (sinew-sandboxd's owner), so another tenant's is unknown to every host.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "api_sandbox_json.h"
#include "api_sandboxes.h"
#include "sinew/sandbox/provisioner_client.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

// How long a client refused for snapshot_bytes is asked to wait: its bytes go only when
// it deletes snapshots or sandboxes, so this is a hint.
constexpr uint32_t kSnapshotsRetryAfterSeconds = 5;

ApiResponse Json(int status, json::object body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

struct HeldSnapshot {
  std::string host_id;  // "" with a single sinew-sandboxd
  v1::SnapshotInfo info;
};
struct TenantSnapshots {
  std::vector<HeldSnapshot> snapshots;
  uint64_t owner_bytes = 0;  // summed over the hosts
};

// The API's JSON of a snapshot: SnapshotToJson, and the host's id with etcd hosts (as
// a sandbox's host_id).
json::object HeldToJson(const HeldSnapshot& s, const std::string& source_id) {
  json::object out = SnapshotToJson(s.info, source_id);
  if (!s.host_id.empty()) out["host_id"] = s.host_id;
  return out;
}

// Every host's answer for `owner`; the first host that does not answer fails it all (a
// quota cannot be counted without it, and a list would be short).
Result<TenantSnapshots> Gather(SandboxBackend& backend, const std::string& owner) {
  SINEW_ASSIGN_OR_RETURN(auto hosts, backend.AllProvisioners());
  TenantSnapshots out;
  for (const auto& host : hosts) {
    auto listed = host.provisioner->ListSnapshots(owner);
    if (!listed.ok()) {
      return Status::Unavailable("sandbox host " + (host.host_id.empty() ? "" : host.host_id + " ") +
                                 "did not list its snapshots: " + listed.status().message());
    }
    out.owner_bytes += listed->owner_bytes();
    for (const auto& s : listed->snapshots()) out.snapshots.push_back(HeldSnapshot{host.host_id, s});
  }
  return out;
}

}  // namespace

std::optional<ApiResponse> SandboxApi::SnapshotRoom(const std::string& tenant) {
  const uint64_t limit = deps_.quotas->QuotaOf(tenant).snapshot_bytes;
  if (limit == 0) return std::nullopt;
  auto held = Gather(*deps_.sandboxes, tenant);
  if (!held.ok()) return ApiHandler::FromStatus(held.status());
  if (held->owner_bytes < limit) return std::nullopt;
  deps_.metrics->Add("sinew_harness_quota_refusals_total", "quota=\"snapshot_bytes\"");
  const uint32_t retry = kSnapshotsRetryAfterSeconds;
  ApiResponse out = ApiHandler::Error(
      429, "quota_exceeded",
      "tenant '" + tenant + "' holds " + std::to_string(held->owner_bytes) +
          " bytes of snapshots and asks for a new one (snapshot_bytes " + std::to_string(limit) +
          "); delete snapshots (DELETE /v1/sandboxes/snapshots/{id}); retry in " + std::to_string(retry) + " s");
  out.headers.emplace_back("Retry-After", std::to_string(retry));
  return out;
}

Result<std::map<std::string, std::string>> SandboxApi::ApiIds(const std::string& tenant) {
  std::map<std::string, std::string> out;
  std::string token;
  do {
    SINEW_ASSIGN_OR_RETURN(SandboxRecords::Page page, records_.List(tenant, 1000, token, /*include_ended=*/true));
    for (const auto& rec : page.records) out[rec.sandbox_id] = rec.id;
    token = page.next_page_token;
  } while (!token.empty());
  return out;
}

ApiResponse SandboxApi::ListSnapshots(const Caller& caller) {
  auto held = Gather(*deps_.sandboxes, caller.tenant);
  if (!held.ok()) return ApiHandler::FromStatus(held.status());
  auto ids = ApiIds(caller.tenant);
  if (!ids.ok()) return ApiHandler::FromStatus(ids.status());
  std::sort(held->snapshots.begin(), held->snapshots.end(),
            [](const HeldSnapshot& a, const HeldSnapshot& b) {
              return a.info.created_unix_ms() != b.info.created_unix_ms()
                         ? a.info.created_unix_ms() > b.info.created_unix_ms()
                         : a.info.id() < b.info.id();
            });
  json::array out;
  for (const auto& s : held->snapshots) {
    auto it = ids->find(s.info.source_sandbox());
    out.push_back(HeldToJson(s, it == ids->end() ? "" : it->second));
  }
  return Json(200, json::object{{"snapshots", std::move(out)},
                                {"owner_bytes", held->owner_bytes},
                                {"quota_bytes", deps_.quotas->QuotaOf(caller.tenant).snapshot_bytes}});
}

ApiResponse SandboxApi::DeleteSnapshot(const ApiRequest& r, const std::string& snapshot_id, const Caller& caller) {
  if (!IsSnapshotId(snapshot_id)) {
    return ApiHandler::Error(404, "not_found",
                             "no snapshot '" + snapshot_id + "' (ids are snap- and 32 lower-case hex digits)");
  }
  auto hosts = deps_.sandboxes->AllProvisioners();
  if (!hosts.ok()) return ApiHandler::FromStatus(hosts.status());
  for (const auto& host : *hosts) {
    auto deleted = host.provisioner->DeleteSnapshot(snapshot_id, caller.tenant);
    if (!deleted.ok() && deleted.status().code() == StatusCode::kNotFound) continue;
    if (!deleted.ok() && deleted.status().code() == StatusCode::kFailedPrecondition) {
      return ApiHandler::Error(409, "conflict",
                               "snapshot " + snapshot_id +
                                   " holds a paused sandbox; resume or delete that sandbox instead");
    }
    if (!deleted.ok()) return ApiHandler::FromStatus(deleted.status());
    std::string source;
    if (auto ids = ApiIds(caller.tenant); ids.ok()) {
      if (auto it = ids->find(deleted->source_sandbox()); it != ids->end()) source = it->second;
    }
    // The record goes under the sandbox it was taken of, else under the snapshot's digits.
    const std::string audit_id = source.empty() ? snapshot_id.substr(5) : source;
    if (Status s = Audit(r, caller, audit_id, "sandbox_snapshot_delete", "snapshot " + snapshot_id); !s.ok()) {
      spdlog::warn("snapshot {}: its deletion is not in the audit log: {}", snapshot_id, s.ToString());
    }
    return Json(200, json::object{{"snapshot", HeldToJson(HeldSnapshot{host.host_id, *deleted}, source)},
                                  {"deleted", true}});
  }
  return ApiHandler::Error(404, "not_found", "no snapshot " + snapshot_id);
}

}  // namespace sinew::harness
