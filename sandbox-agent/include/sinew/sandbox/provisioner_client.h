// ProvisionerClient: asks sinew-sandboxd (the Provisioner service of
// proto/sandbox.proto, default 127.0.0.1:7702) for sandboxes and learns how they ended.
//
// Typical use:
//   auto prov = ProvisionerClient::Connect("127.0.0.1:7702");
//   auto box = (*prov)->Provision(resources);             // SandboxInfo with endpoint
//   auto tools = SandboxClient::Connect(box->endpoint());
//   ... (*tools)->Execute("bash", R"({"command":"ls"})") ...
//   (*prov)->Destroy(box->id());
//
// Errors are the daemon's gRPC status mapped to sinew::Status (see sinew/grpc_status.h):
// kInvalidArgument for bad resources, kFailedPrecondition for a missing image (the
// message says how to build it), kNotFound for an unknown id, kUnavailable when the
// daemon does not answer.
//
// Thread-safety: all methods may be called concurrently from several threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/grpc_tls_options.h"
#include "sinew/proto/sandbox.pb.h"
#include "sinew/status.h"

namespace sinew::sandbox {

inline constexpr std::string_view kDefaultProvisionerAddress = "127.0.0.1:7702";

class ProvisionerClient {
 public:
  virtual ~ProvisionerClient() = default;

  // Creates a client for the daemon at `address` (host:port). Does not wait for the
  // daemon; the first call fails with kUnavailable if it is down.
  // `call_timeout` bounds each call. Default: 2 minutes
  // `tls`: mTLS to the daemon (docs/security.md); fails at once when its files are
  // unreadable or do not match. Default: none (plain gRPC)
  // `provision_timeout` bounds Provision instead (it waits in the daemon's start line,
  // first come first served, when many sandboxes are asked for at once). Default: 0, the
  // call timeout
  [[nodiscard]] static Result<std::unique_ptr<ProvisionerClient>> Connect(
      std::string address = std::string(kDefaultProvisionerAddress),
      std::chrono::milliseconds call_timeout = std::chrono::minutes(2),
      const GrpcTlsOptions& tls = {}, std::chrono::milliseconds provision_timeout = {});

  // A ready sandbox of this shape. `label` is free text shown by List (e.g. a session id).
  // The hand-over is confirmed with a Claim before this returns, so a sandbox whose
  // answer is lost on the way is ended by the daemon (UNCLAIMED) rather than left
  // running unowned; kUnavailable when the claim failed (provision again).
  [[nodiscard]] virtual Result<v1::SandboxInfo> Provision(const v1::Resources& resources,
                                                          std::string_view label = {}) = 0;
  // Provision without a thread waiting: returns at once, and `done` gets what Provision
  // would return, once, on a gRPC thread (or on the caller's, before this returns, when
  // the call cannot start). `done` must be quick and must not block. The client must
  // outlive the call. The outgoing trace is the calling thread's.
  using ProvisionDone = std::function<void(Result<v1::SandboxInfo>)>;
  virtual void ProvisionAsync(const v1::Resources& resources, std::string_view label, ProvisionDone done) = 0;
  // Kills and removes it; returns its final info (outcome DESTROYED unless it had ended).
  [[nodiscard]] virtual Result<v1::SandboxInfo> Destroy(std::string_view id) = 0;
  // Current info; for an ended sandbox, `outcome` says how it ended.
  [[nodiscard]] virtual Result<v1::SandboxInfo> Get(std::string_view id) = 0;
  [[nodiscard]] virtual Result<std::vector<v1::SandboxInfo>> List(bool include_ended = false) = 0;
  [[nodiscard]] virtual Result<v1::ProvisionerHealthResponse> Health() = 0;

  // Snapshots, fork, pause and resume (proto/sandbox.proto; docs/sandbox.md). `owner`
  // must be the sandbox's (ProvisionRequest.owner), else kNotFound.
  // Provision with every field of the request (owner, from_snapshot), claimed like Provision.
  [[nodiscard]] virtual Result<v1::SandboxInfo> ProvisionWith(v1::ProvisionRequest request) = 0;
  [[nodiscard]] virtual Result<v1::SnapshotInfo> Snapshot(std::string_view sandbox_id,
                                                          std::string_view owner = {}) = 0;
  [[nodiscard]] virtual Result<v1::SnapshotInfo> DeleteSnapshot(std::string_view id,
                                                                std::string_view owner = {}) = 0;
  [[nodiscard]] virtual Result<v1::ListSnapshotsResponse> ListSnapshots(std::string_view owner = {}) = 0;
  // The new sandboxes are claimed before this returns (as Provision's are).
  [[nodiscard]] virtual Result<v1::ForkResponse> Fork(v1::ForkRequest request) = 0;
  // `if_idle`: only when no process besides the agent runs (PauseRequest.if_idle).
  [[nodiscard]] virtual Result<v1::SandboxInfo> Pause(std::string_view id, std::string_view owner = {},
                                                      bool if_idle = false) = 0;
  [[nodiscard]] virtual Result<v1::SandboxInfo> Resume(std::string_view id, std::string_view owner = {}) = 0;
};

}  // namespace sinew::sandbox
