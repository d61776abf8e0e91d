// What both sandbox backends (grpc_sandbox_backend.cc: one sinew-sandboxd; sandbox_hosts.cc:
// hosts placed through etcd) share: reading the task's "sandbox" object and turning the
// provisioner's answers into the harness's terms. Internal to the harness.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "sinew/proto/sandbox.pb.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sandbox_backend.h"

namespace sinew::harness {

// The task's "sandbox" object (validated when the session was created; may be empty).
struct SandboxSpec {
  v1::Resources resources;  // zero fields: the host's defaults
  bool attach = false;      // {"attach": {"id", "endpoint"}}: an existing sandbox
  std::string attach_id;
  std::string attach_endpoint;
};
SandboxSpec ParseSandboxSpec(const std::string& spec_json);

// Provisioned from the provisioner's info (no host fields).
SandboxBackend::Provisioned ToProvisioned(const v1::SandboxInfo& info);
// An attached sandbox must be running at the endpoint the task named.
Result<SandboxBackend::Provisioned> CheckAttached(const v1::SandboxInfo& info,
                                                  const SandboxSpec& spec);
ToolOutcome ToOutcome(const v1::ExecuteResult& result);
// The sandbox clients a backend has connected, by sandbox id. A call that fails marks its
// client broken (on whichever thread learns it: nothing is destroyed there), and the next
// lookup drops it, so that the caller connects afresh. Thread-safe.
class SandboxClients {
 public:
  // The client of `sandbox_id`, or null when there is none (or it broke).
  sandbox::SandboxClient* Find(const std::string& sandbox_id);
  sandbox::SandboxClient* Put(const std::string& sandbox_id, std::unique_ptr<sandbox::SandboxClient> client);
  void Forget(const std::string& sandbox_id);
  // Runs the call on the client of `sandbox_id` (REQUIRES: Find or Put gave it) without
  // holding a thread; a failure marks the client broken.
  void ExecuteAsync(const std::string& sandbox_id, const std::string& call_id, const std::string& name,
                    const std::string& input_json, SandboxBackend::ExecuteDone done);
  // Stops call `call_id` on the client of `sandbox_id` (REQUIRES: as ExecuteAsync).
  [[nodiscard]] Status CancelCall(const std::string& sandbox_id, const std::string& call_id);

 private:
  struct Entry {
    std::unique_ptr<sandbox::SandboxClient> client;
    std::shared_ptr<std::atomic<bool>> broken = std::make_shared<std::atomic<bool>>(false);
  };
  std::mutex mu_;
  // Entries are only erased by the session that uses the sandbox (its calls are
  // sequential), never while a call of theirs runs.
  std::map<std::string, Entry> entries_;  // guarded by mu_
};

// provisioner.ProvisionAsync, waited on without a thread (the caller co_awaits it at once).
Task<Result<v1::SandboxInfo>> ProvisionOn(sandbox::ProvisionerClient& provisioner, const v1::Resources& resources,
                                          const std::string& label);

// A snapshot of a session's sandbox, and the deletion of one, on the host at
// `host_address` (SandboxRef.host_address; "" with a single sinew-sandboxd). Session
// sandboxes are the harness's own (owner ""). Blocking (one RPC).
Result<v1::SnapshotInfo> SnapshotSessionSandbox(SandboxBackend& sandboxes, const SandboxRef& box);
Result<v1::SnapshotInfo> DeleteSessionSnapshot(SandboxBackend& sandboxes, const std::string& host_address,
                                               const std::string& snapshot_id);

// Asks `provisioner` how sandbox `id` ended, waiting up to 2 s for it to record the end.
std::pair<std::string, std::string> AskHowItEnded(sandbox::ProvisionerClient& provisioner,
                                                  const std::string& id);

}  // namespace sinew::harness
