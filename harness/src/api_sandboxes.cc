// SandboxApi: routing, create, list, get, delete and admission. Execute, snapshot, fork,
// pause and resume: api_sandbox_calls.cc; upload and download: api_sandbox_files.cc.
#include "api_sandboxes.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "api_sandbox_json.h"
#include "json_util.h"
#include "sinew/json_fields.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadString;
using json_fields::ReadUint;
using json_fields::ReadUint32;
using json_fields::RejectUnknownKeys;

ApiResponse Json(int status, json::object body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

ApiResponse TooMany(const std::string& code, const std::string& message, uint32_t retry_after) {
  ApiResponse out =
      ApiHandler::Error(429, code, message + "; retry in " + std::to_string(retry_after) + " s");
  out.headers.emplace_back("Retry-After", std::to_string(retry_after));
  return out;
}

// How long a client refused for max_api_sandboxes is asked to wait: nothing says when
// one of its sandboxes goes, so this is a hint.
constexpr uint32_t kSandboxesRetryAfterSeconds = 5;

// The create body: the resources in the names of a task's "sandbox" object, and a snapshot.
Result<v1::ProvisionRequest> ParseCreate(const std::string& body_text) {
  SINEW_ASSIGN_OR_RETURN(json::object body, ParseObject(body_text, "request body"));
  const std::string w = "body";
  SINEW_RETURN_IF_ERROR(
      RejectUnknownKeys(body,
                        "image,runtime,cpu_millis,memory_bytes,memory_limit_bytes,pids,disk_bytes,"
                        "lifetime_seconds,network,from_snapshot",
                        w));
  v1::ProvisionRequest req;
  v1::Resources& res = *req.mutable_resources();
  uint32_t cpu = 0, pids = 0, lifetime = 0;
  uint64_t memory = 0, memory_limit = 0, disk = 0;
  std::string image, runtime, network, snapshot;
  SINEW_RETURN_IF_ERROR(ReadUint32(body, "cpu_millis", w, &cpu));
  SINEW_RETURN_IF_ERROR(ReadUint32(body, "pids", w, &pids));
  SINEW_RETURN_IF_ERROR(ReadUint32(body, "lifetime_seconds", w, &lifetime));
  SINEW_RETURN_IF_ERROR(ReadUint(body, "memory_bytes", w, UINT64_MAX / 2, &memory));
  SINEW_RETURN_IF_ERROR(ReadUint(body, "memory_limit_bytes", w, UINT64_MAX / 2, &memory_limit));
  SINEW_RETURN_IF_ERROR(ReadUint(body, "disk_bytes", w, UINT64_MAX / 2, &disk));
  SINEW_RETURN_IF_ERROR(ReadString(body, "image", w, &image));
  SINEW_RETURN_IF_ERROR(ReadString(body, "runtime", w, &runtime));
  SINEW_RETURN_IF_ERROR(ReadString(body, "network", w, &network));
  SINEW_RETURN_IF_ERROR(ReadString(body, "from_snapshot", w, &snapshot));
  if (!runtime.empty() && runtime != "runc" && runtime != "runsc") {
    return Status::InvalidArgument("body.runtime must be \"runc\" or \"runsc\"");
  }
  if (!snapshot.empty() && !IsSnapshotId(snapshot)) {
    return Status::InvalidArgument(
        "body.from_snapshot must be a snapshot id (snap- and 32 hex digits)");
  }
  res.set_cpu_millicores(cpu);
  res.set_pids_limit(pids);
  res.set_lifetime_seconds(lifetime);
  res.set_memory_guaranteed_bytes(memory);
  res.set_memory_limit_bytes(memory_limit);
  res.set_workspace_bytes(disk);
  res.set_image(image);
  res.set_runtime(runtime);
  res.set_network(network);
  req.set_from_snapshot(snapshot);
  return req;
}

// A refusal of sinew-sandboxd's about a request: the caller's input (4xx) or the service.
ApiResponse ProvisionerRefusal(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return ApiHandler::Error(400, "invalid_argument", s.message());
    case StatusCode::kFailedPrecondition:  // an image that is not built; a snapshot of another
                                           // shape
      return ApiHandler::Error(400, "invalid_argument", s.message());
    case StatusCode::kNotFound:
      return ApiHandler::Error(400, "invalid_argument", s.message());
    case StatusCode::kResourceExhausted:
      return ApiHandler::Error(503, "unavailable", s.message());
    default:
      return ApiHandler::FromStatus(s);
  }
}

}  // namespace

SandboxRoutes MakeSandboxRoutes(const HarnessDeps* deps) {
  auto api = std::make_shared<SandboxApi>(deps);
  return [api](const ApiRequest& r, const Caller& caller, const std::vector<std::string>& parts,
               const std::string& query) { return api->Handle(r, caller, parts, query); };
}

SandboxApi::SandboxApi(const HarnessDeps* deps) : deps_(*deps), records_(deps->store) {}
SandboxApi::~SandboxApi() = default;

ApiResponse SandboxApi::Handle(const ApiRequest& r, const Caller& caller,
                               const std::vector<std::string>& parts, const std::string& query) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  auto not_allowed = [&](const char* methods) {
    return ApiHandler::Error(405, "method_not_allowed",
                             r.method + " is not allowed on " + path + "; use " + methods);
  };
  auto needs_json = [&]() -> std::optional<ApiResponse> {
    if (r.content_type.rfind("application/json", 0) != 0) {
      return ApiHandler::Error(415, "unsupported_media_type",
                               "send the body as Content-Type: application/json");
    }
    return std::nullopt;
  };
  if (parts.size() == 2) {
    if (r.method == "POST") {
      if (auto e = needs_json()) return *e;
      return Create(r, caller);
    }
    if (r.method != "GET") return not_allowed("GET or POST");
    return List(query, caller);
  }
  const std::string& id = parts[2];
  if (id == "snapshots") {  // never a sandbox's id (32 hex digits)
    if (parts.size() == 3) {
      if (r.method != "GET") return not_allowed("GET");
      return ListSnapshots(caller);
    }
    if (parts.size() == 4) {
      if (r.method != "DELETE") return not_allowed("DELETE");
      return DeleteSnapshot(r, parts[3], caller);
    }
    return ApiHandler::Error(404, "not_found", "no such endpoint: " + path);
  }
  if (parts.size() == 3) {
    if (r.method == "GET") return Get(id, caller);
    if (r.method == "DELETE") return Delete(r, id, caller);
    return not_allowed("GET or DELETE");
  }
  if (parts.size() == 4) {
    const std::string& verb = parts[3];
    const bool known = verb == "execute" || verb == "snapshot" || verb == "fork" ||
                       verb == "pause" || verb == "resume";
    if (known && r.method != "POST") return not_allowed("POST");
    if (verb == "execute" || verb == "fork") {
      if (auto e = needs_json(); e && (verb == "execute" || !r.body.empty())) return *e;
      return verb == "execute" ? Execute(r, id, caller) : Fork(r, id, caller);
    }
    if (verb == "files") {
      if (r.method == "PUT") return Upload(r, id, query, caller);
      if (r.method == "GET") return Download(r, id, query, caller);
      return not_allowed("GET or PUT");
    }
    if (verb == "snapshot") return Snapshot(r, id, caller);
    if (verb == "pause" || verb == "resume") return PauseOrResume(r, id, caller, verb == "pause");
  }
  return ApiHandler::Error(404, "not_found", "no such endpoint: " + path);
}

std::optional<ApiResponse> SandboxApi::Admit(const std::string& tenant, const Ask& ask) {
  const TenantQuotaConfig& quota = deps_.quotas->QuotaOf(tenant);
  std::lock_guard<std::mutex> admission(admission_mu_);
  InFlight flight;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = in_flight_.find(tenant); it != in_flight_.end()) flight = it->second;
  }
  const uint32_t n = ask.sandboxes;
  if (quota.max_api_sandboxes != 0 && n != 0) {
    auto live = records_.CountLive(tenant, quota.max_api_sandboxes + 1);
    if (!live.ok()) return ApiHandler::FromStatus(live.status());
    if (*live + flight.sandboxes + n > quota.max_api_sandboxes) {
      deps_.metrics->Add("sinew_harness_quota_refusals_total", "quota=\"max_api_sandboxes\"");
      return TooMany("quota_exceeded",
                     "tenant '" + tenant + "' holds " + std::to_string(*live + flight.sandboxes) +
                         " sandboxes (max_api_sandboxes " +
                         std::to_string(quota.max_api_sandboxes) + ")",
                     kSandboxesRetryAfterSeconds);
    }
  }
  if (quota.sandbox_creations_per_minute != 0 && n != 0) {
    const int64_t now = NowUnixMs();
    auto recent = records_.CreatedSince(tenant, now - 60000);
    if (!recent.ok()) return ApiHandler::FromStatus(recent.status());
    const uint64_t count = recent->size() + flight.sandboxes;
    if (count + n > quota.sandbox_creations_per_minute) {
      // The creation that must age out of the minute for these to fit (newest first).
      const uint64_t must_go = count + n - quota.sandbox_creations_per_minute;
      int64_t wait_ms = 60000;
      if (must_go <= recent->size()) wait_ms = (*recent)[recent->size() - must_go] + 60000 - now;
      const auto retry = static_cast<uint32_t>(std::max<int64_t>(1, (wait_ms + 999) / 1000));
      deps_.metrics->Add("sinew_harness_quota_refusals_total",
                         "quota=\"sandbox_creations_per_minute\"");
      return TooMany("rate_limited",
                     "tenant '" + tenant + "' created " + std::to_string(count) +
                         " sandboxes in the last minute (sandbox_creations_per_minute " +
                         std::to_string(quota.sandbox_creations_per_minute) + ")",
                     retry);
    }
  }
  if (auto refused = AdmitUse(tenant, ask, flight.use)) return refused;
  std::lock_guard<std::mutex> lock(mu_);
  InFlight& mine = in_flight_[tenant];
  mine.sandboxes += n;
  mine.use.memory_bytes += ask.use.memory_bytes;
  mine.use.cpu_millis += ask.use.cpu_millis;
  return std::nullopt;
}

std::optional<ApiResponse> SandboxApi::AdmitUse(const std::string& tenant, const Ask& ask,
                                                const SandboxUse& others) {
  const TenantQuotaConfig& quota = deps_.quotas->QuotaOf(tenant);
  if (quota.sandbox_memory_bytes == 0 && quota.sandbox_cpu_millis == 0) return std::nullopt;
  auto ready = records_.ReadyUse(tenant);
  if (!ready.ok()) return ApiHandler::FromStatus(ready.status());
  struct Check {
    const char* name;
    const char* unit;
    uint64_t limit, held, asked;
  };
  const Check checks[] = {
      {"sandbox_memory_bytes", " bytes of guaranteed memory", quota.sandbox_memory_bytes,
       ready->memory_bytes + others.memory_bytes, ask.use.memory_bytes},
      {"sandbox_cpu_millis", " CPU millis", quota.sandbox_cpu_millis,
       ready->cpu_millis + others.cpu_millis, ask.use.cpu_millis},
  };
  for (const Check& c : checks) {
    if (c.limit == 0 || c.held + c.asked <= c.limit) continue;
    deps_.metrics->Add("sinew_harness_quota_refusals_total", std::string("quota=\"") + c.name + "\"");
    return TooMany("quota_exceeded",
                   "tenant '" + tenant + "' holds " + std::to_string(c.held) + c.unit +
                       " in ready sandboxes and asks for " + std::to_string(c.asked) + " more (" +
                       c.name + " " + std::to_string(c.limit) + ")",
                   kSandboxesRetryAfterSeconds);
  }
  return std::nullopt;
}

std::optional<ApiResponse> SandboxApi::Readmit(const std::string& tenant, const Ask& admitted,
                                               const Ask& actual) {
  std::lock_guard<std::mutex> admission(admission_mu_);
  SandboxUse others;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = in_flight_.find(tenant); it != in_flight_.end()) others = it->second.use;
  }
  others.memory_bytes -= std::min(others.memory_bytes, admitted.use.memory_bytes);
  others.cpu_millis -= std::min(others.cpu_millis, admitted.use.cpu_millis);
  if (auto refused = AdmitUse(tenant, actual, others)) return refused;
  std::lock_guard<std::mutex> lock(mu_);
  InFlight& mine = in_flight_[tenant];
  mine.use.memory_bytes = others.memory_bytes + actual.use.memory_bytes;
  mine.use.cpu_millis = others.cpu_millis + actual.use.cpu_millis;
  return std::nullopt;
}

void SandboxApi::Settle(const std::string& tenant, const Ask& ask) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(tenant);
  if (it == in_flight_.end()) return;
  InFlight& f = it->second;
  f.sandboxes -= std::min(f.sandboxes, ask.sandboxes);
  f.use.memory_bytes -= std::min(f.use.memory_bytes, ask.use.memory_bytes);
  f.use.cpu_millis -= std::min(f.use.cpu_millis, ask.use.cpu_millis);
  if (f.sandboxes == 0 && f.use.memory_bytes == 0 && f.use.cpu_millis == 0) in_flight_.erase(it);
}

Status SandboxApi::Audit(const ApiRequest& r, const Caller& caller, const std::string& id,
                         const std::string& action, const std::string& detail) {
  v1::AppendAuditRequest req;
  req.set_session_id(id);
  *req.mutable_audit() = AuditEvent(r, caller, action, detail).audit();
  return deps_.store->AppendAudit(req).status();
}

ApiResponse SandboxApi::Create(const ApiRequest& r, const Caller& caller) {
  auto req = ParseCreate(r.body);
  if (!req.ok()) return ApiHandler::FromStatus(req.status());
  // What the request names; the host's defaults (or a snapshot's values) for the rest
  // are known once it is provisioned, and admitted again then.
  Ask ask{1, UseOf(json::serialize(ResourcesToJson(req->resources())))};
  if (auto refused = Admit(caller.tenant, ask)) return *refused;
  req->set_owner(caller.tenant);
  req->set_label("sandbox-api " + caller.tenant);
  auto provisioned = deps_.sandboxes->ProvisionBlocking(*req);
  if (!provisioned.ok()) {
    Settle(caller.tenant, ask);
    return ProvisionerRefusal(provisioned.status());
  }
  v1::Resources resources;
  if (!google::protobuf::util::JsonStringToMessage(provisioned->resources_json, &resources).ok()) {
    resources = req->resources();
  }
  const std::string resources_json = json::serialize(ResourcesToJson(resources));
  const Ask actual{1, UseOf(resources_json)};
  if (auto refused = Readmit(caller.tenant, ask, actual)) {
    // Over a resource quota with the defaults filled in: it goes before anyone saw it.
    Settle(caller.tenant, ask);
    if (auto prov = deps_.sandboxes->ProvisionerAt(provisioned->host_address); prov.ok()) {
      (void)(*prov)->Destroy(provisioned->id);
    }
    return *refused;
  }
  ask = actual;
  NewSandboxRecord fresh{provisioned->id, provisioned->host_id, provisioned->host_address,
                         resources_json, req->from_snapshot()};
  auto record = records_.Create(caller.tenant, fresh);
  Settle(caller.tenant, ask);
  if (!record.ok()) {
    // Without its record nobody could reach it: it goes.
    if (auto prov = deps_.sandboxes->ProvisionerAt(provisioned->host_address); prov.ok()) {
      (void)(*prov)->Destroy(provisioned->id);
    }
    return ApiHandler::FromStatus(record.status());
  }
  const std::string detail =
      "image " + resources.image() + ", runtime " + resources.runtime() +
      (provisioned->host_id.empty() ? "" : ", host " + provisioned->host_id) +
      (req->from_snapshot().empty() ? "" : ", from " + req->from_snapshot());
  if (Status s = Audit(r, caller, record->id, "sandbox_create", detail); !s.ok()) {
    spdlog::warn("sandbox {}: its creation is not in the audit log: {}", record->id, s.ToString());
  }
  return Json(201, json::object{{"sandbox", SandboxToJson(*record)}});
}

ApiResponse SandboxApi::List(const std::string& query, const Caller& caller) {
  bool has_limit = false;
  const std::string limit_text = QueryParam(query, "limit", &has_limit);
  uint64_t limit = 50;
  if (has_limit) {
    auto parsed = ParseDecimal(limit_text, 1000);
    if (!parsed || *parsed == 0) {
      return ApiHandler::Error(400, "invalid_argument",
                               "query parameter limit must be an integer in [1, 1000]");
    }
    limit = *parsed;
  }
  const std::string page_token = QueryParam(query, "page_token");
  if (page_token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return ApiHandler::Error(
        400, "invalid_argument",
        "page_token is not one this API issued; repeat the request without it");
  }
  const std::string all = QueryParam(query, "include_ended");
  if (!all.empty() && all != "true" && all != "false") {
    return ApiHandler::Error(400, "invalid_argument",
                             "query parameter include_ended must be true or false");
  }
  auto page = records_.List(caller.tenant, static_cast<uint32_t>(limit), page_token, all == "true");
  if (!page.ok()) return ApiHandler::FromStatus(page.status());
  json::array sandboxes;
  for (const auto& rec : page->records) sandboxes.push_back(SandboxToJson(rec));
  return Json(200, json::object{{"sandboxes", std::move(sandboxes)},
                                {"next_page_token", page->next_page_token}});
}

SandboxRecord SandboxApi::Reconciled(const SandboxRecord& record, json::object* live) {
  if (record.state != "ready" && record.state != "paused") return record;
  auto prov = deps_.sandboxes->ProvisionerAt(record.host_address);
  if (!prov.ok()) return record;
  auto info = (*prov)->Get(record.sandbox_id);
  if (!info.ok()) {
    if (info.status().code() != StatusCode::kNotFound)
      return record;  // its host does not answer now
    auto ended = records_.SetState(record, "ended",
                                   "its host no longer knows it (ended and forgotten, or lost)");
    return ended.ok() ? *ended : record;
  }
  if (live != nullptr) *live = LiveToJson(*info);
  if (info->state() != v1::SANDBOX_STATE_ENDED) return record;
  ForgetClient(record.sandbox_id);
  auto ended = records_.SetState(record, "ended", OutcomeText(*info));
  return ended.ok() ? *ended : record;
}

ApiResponse SandboxApi::Get(const std::string& id, const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  json::object live;
  SandboxRecord now = Reconciled(*record, &live);
  json::object out = SandboxToJson(now);
  if (!live.empty()) out["live"] = std::move(live);
  return Json(200, json::object{{"sandbox", std::move(out)}});
}

ApiResponse SandboxApi::Delete(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  if (record->state == "deleted")
    return Json(200, json::object{{"sandbox", SandboxToJson(*record)}});
  auto prov = deps_.sandboxes->ProvisionerAt(record->host_address);
  if (!prov.ok()) return ApiHandler::FromStatus(prov.status());
  ForgetClient(record->sandbox_id);
  auto destroyed = (*prov)->Destroy(record->sandbox_id);
  if (!destroyed.ok() && destroyed.status().code() != StatusCode::kNotFound) {
    return ApiHandler::FromStatus(destroyed.status());
  }
  auto deleted = records_.SetState(*record, "deleted", "deleted through the API");
  if (!deleted.ok()) return ApiHandler::FromStatus(deleted.status());
  if (Status s = Audit(r, caller, id, "sandbox_delete", "sandbox " + id); !s.ok()) {
    spdlog::warn("sandbox {}: its deletion is not in the audit log: {}", id, s.ToString());
  }
  return Json(200, json::object{{"sandbox", SandboxToJson(*deleted)}});
}

Result<std::shared_ptr<sandbox::SandboxClient>> SandboxApi::ClientFor(const SandboxRecord& record) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = clients_.find(record.sandbox_id);
    if (it != clients_.end()) return it->second;
  }
  SINEW_ASSIGN_OR_RETURN(auto* prov, deps_.sandboxes->ProvisionerAt(record.host_address));
  SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, prov->Get(record.sandbox_id));
  if (info.state() != v1::SANDBOX_STATE_READY) {
    return Status::FailedPrecondition("sandbox " + record.id + " is not running");
  }
  SINEW_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::SandboxClient> client,
                         sandbox::SandboxClient::ConnectTo(info));
  std::shared_ptr<sandbox::SandboxClient> shared = std::move(client);
  std::lock_guard<std::mutex> lock(mu_);
  clients_[record.sandbox_id] = shared;
  return shared;
}

void SandboxApi::ForgetClient(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lock(mu_);
  clients_.erase(sandbox_id);
}

}  // namespace sinew::harness
