// SandboxApi: the sandbox API (/v1/sandboxes; docs/sandbox-api.md): sandboxes for
// outside orchestrators, made and used through the harness with the same API keys and
// tenants as sessions, kept as SandboxRecords in the store so that any harness answers
// for any of them, reached on their host through the SandboxBackend's provisioners.
//
// Every route answers a sandbox of the caller's tenant only: another tenant's id is a
// 404, as an unknown one; so is another tenant's snapshot (GET /v1/sandboxes/snapshots
// lists the tenant's own on every host). Bad input is a 4xx that creates and changes
// nothing. Creation, deletion, every executed call, snapshot, snapshot deletion, fork,
// pause, resume, upload and download are written to the tenant's audit log (GET
// /v1/audit), an executed call and an upload before they run, a download before its
// bytes are answered.
//
// Thread-safety: Handle may be called from many threads at once. It blocks while it
// calls the store, sinew-sandboxd and the sandbox (a tool call: as long as it runs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api_handler.h"
#include "sandbox_records.h"

namespace sinew::sandbox {
class SandboxClient;
}  // namespace sinew::sandbox

namespace sinew::harness {

class SandboxApi {
 public:
  // `deps` is not owned and outlives this.
  explicit SandboxApi(const HarnessDeps* deps);
  ~SandboxApi();

  // A request under /v1/sandboxes: `parts` is its path split at '/' ("v1", "sandboxes",
  // ...), `query` its query string. REQUIRES: the caller is authenticated and was let
  // through the tenant's request rate.
  ApiResponse Handle(const ApiRequest& r, const Caller& caller,
                     const std::vector<std::string>& parts, const std::string& query);

 private:
  ApiResponse Create(const ApiRequest& r, const Caller& caller);
  ApiResponse List(const std::string& query, const Caller& caller);
  ApiResponse Get(const std::string& id, const Caller& caller);
  ApiResponse Delete(const ApiRequest& r, const std::string& id, const Caller& caller);
  ApiResponse Execute(const ApiRequest& r, const std::string& id, const Caller& caller);
  // Execute answered as an event stream (Accept: text/event-stream): `output` events
  // ({"stream", "text"}) as the call writes, then `result` ({"result"}) or `error`
  // ({"error"}: what the JSON answer's error would have been).
  ApiResponse ExecuteEvents(const SandboxRecord& record, const std::string& name, const std::string& input_json,
                            const std::string& call_id, std::shared_ptr<sandbox::SandboxClient> client);
  ApiResponse Snapshot(const ApiRequest& r, const std::string& id, const Caller& caller);
  ApiResponse Fork(const ApiRequest& r, const std::string& id, const Caller& caller);
  ApiResponse PauseOrResume(const ApiRequest& r, const std::string& id, const Caller& caller,
                            bool pause);
  // GET /v1/sandboxes/snapshots and DELETE /v1/sandboxes/snapshots/{id}
  // (api_sandbox_snapshots.cc): the tenant's snapshots on every host.
  ApiResponse ListSnapshots(const Caller& caller);
  ApiResponse DeleteSnapshot(const ApiRequest& r, const std::string& snapshot_id, const Caller& caller);
  // PUT and GET /v1/sandboxes/{id}/files?path=... (api_sandbox_files.cc).
  ApiResponse Upload(const ApiRequest& r, const std::string& id, const std::string& query,
                     const Caller& caller);
  ApiResponse Download(const ApiRequest& r, const std::string& id, const std::string& query,
                       const Caller& caller);

  // A sandbox that is not ready cannot take a request: 409 saying what to do; nullopt
  // when it is ready.
  static std::optional<ApiResponse> NotReady(const SandboxRecord& record);
  // The answer when a call to the record's sandbox failed for the transport: its end
  // noticed (409), or 503.
  ApiResponse Unreachable(const SandboxRecord& record, const Status& failure);

  // What one admission asks for: `sandboxes` new ones (0 for a resume) and the memory
  // and CPU all of them hold once ready.
  struct Ask {
    uint32_t sandboxes = 0;
    SandboxUse use;
  };
  // Admission of `ask` for the tenant (max_api_sandboxes and sandbox_creations_per_minute
  // for new sandboxes, sandbox_memory_bytes and sandbox_cpu_millis for their resources;
  // counted in the store plus this harness's admissions in flight): a 429 with
  // Retry-After, or nullopt with `ask` counted in flight until Settle.
  std::optional<ApiResponse> Admit(const std::string& tenant, const Ask& ask);
  // A create's admission again once its host filled in the resources it left to defaults:
  // `admitted` (in flight) is replaced by `actual` (nullopt), or a 429 leaves `admitted`
  // in flight for the caller to Settle.
  std::optional<ApiResponse> Readmit(const std::string& tenant, const Ask& admitted, const Ask& actual);
  void Settle(const std::string& tenant, const Ask& ask);
  // The sandbox_memory_bytes and sandbox_cpu_millis part of an admission. REQUIRES:
  // admission_mu_ held; `others`: what is in flight here besides `ask`.
  std::optional<ApiResponse> AdmitUse(const std::string& tenant, const Ask& ask, const SandboxUse& others);
  // nullopt while the tenant's snapshot bytes (owner_bytes on every host) are under
  // snapshot_bytes; a 429 once they reach it (a new snapshot's size is not known before
  // it is taken); the store's or a host's failure as its answer.
  std::optional<ApiResponse> SnapshotRoom(const std::string& tenant);
  // sinew-sandboxd's ids of the tenant's sandboxes (all its records) -> the API's ids.
  Result<std::map<std::string, std::string>> ApiIds(const std::string& tenant);
  // Writes an audit record about sandbox `id` to the caller's tenant's audit log.
  Status Audit(const ApiRequest& r, const Caller& caller, const std::string& id,
               const std::string& action, const std::string& detail);
  // A client of the record's sandbox (cached by sinew-sandboxd's id; a failed call drops it).
  Result<std::shared_ptr<sandbox::SandboxClient>> ClientFor(const SandboxRecord& record);
  void ForgetClient(const std::string& sandbox_id);
  // The record with its ended state written when sinew-sandboxd says the sandbox ended
  // (a read notices it: its lifetime, an OOM kill, a lost host).
  SandboxRecord Reconciled(const SandboxRecord& record, boost::json::object* live);

  const HarnessDeps& deps_;
  SandboxRecords records_;
  std::mutex admission_mu_;  // held while one admission counts (store reads) and takes its place
  std::mutex mu_;
  struct InFlight {
    uint32_t sandboxes = 0;
    SandboxUse use;
  };
  std::map<std::string, InFlight> in_flight_;  // tenant -> admissions under way here; guarded by mu_
  std::map<std::string, std::shared_ptr<sandbox::SandboxClient>> clients_;  // guarded by mu_
};

}  // namespace sinew::harness
