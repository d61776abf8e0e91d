// The hands, seen from the harness: SandboxBackend provisions sandboxes through
// sinew-sandboxd (one, or hosts placed over through etcd) and runs tools in them.
//
// Thread-safety: a SandboxBackend may be used from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "async.h"
#include "sinew/harness/config.h"
#include "sinew/proto/sandbox.pb.h"
#include "sinew/status.h"
#include "tool_catalog.h"

namespace sinew::sandbox {
class ProvisionerClient;  // sinew/sandbox/provisioner_client.h
}  // namespace sinew::sandbox

namespace sinew::harness {

// A session's sandbox as its log records it (sandbox_provisioned): its id, and the host
// that holds it when sandboxes are placed over several hosts (docs/scale-out.md; both
// empty with a single sinew-sandboxd).
struct SandboxRef {
  std::string id;
  std::string host_id;
  std::string host_address;
};

// The hands, seen from the harness: provisions sandboxes through sinew-sandboxd and
// runs tools in them.
class SandboxBackend {
 public:
  virtual ~SandboxBackend() = default;
  // `address` of sinew-sandboxd; "" gives a backend whose every call fails clearly.
  // `tls`: mTLS to sinew-sandboxd (config.grpc_tls). Default: plain gRPC
  // `provision_timeout`: how long a provision may wait for its sandbox
  // (config.sandboxd.provision_timeout_seconds).
  static std::unique_ptr<SandboxBackend> Create(
      const std::string& address, const GrpcTlsOptions& tls = {},
      std::chrono::seconds provision_timeout = std::chrono::seconds(kDefaultSandboxProvisionTimeoutSeconds));
  // Sandboxes placed over the hosts registered in the etcd at `etcd` (host:port) by the
  // rule of placement.h; see docs/scale-out.md. `tls` and `provision_timeout` as for
  // Create; `etcd_tls`: TLS to etcd (config.etcd_tls). Does not wait for etcd.
  static Result<std::unique_ptr<SandboxBackend>> CreateForEtcd(
      const std::string& etcd, const GrpcTlsOptions& tls = {}, const GrpcTlsOptions& etcd_tls = {},
      std::chrono::seconds provision_timeout = std::chrono::seconds(kDefaultSandboxProvisionTimeoutSeconds));

  struct Provisioned {
    std::string id;
    std::string endpoint;
    std::string resources_json;
    int64_t provision_ms = 0;
    bool from_warm_pool = false;
    std::string host_id;       // "" with a single sinew-sandboxd
    std::string host_address;  // the host's Provisioner address; "" with a single one
    int64_t placement_us = 0;  // time the placement decision took (etcd hosts only)
  };
  // `spec_json`: the task's "sandbox" object (may be empty). A coroutine that holds no
  // thread while the provisioner starts the sandbox (gRPC's callback API, the etcd
  // placement's tries one after another); attaching to a sandbox the task names asks the
  // provisioner on `blocking` (short). The caller co_awaits it at once.
  [[nodiscard]] virtual Task<Result<Provisioned>> Provision(const std::string& spec_json, const std::string& label,
                                                            asio::thread_pool& blocking) = 0;
  // Runs tool call `call_id` in `sandbox` (reached through the provisioner's answer for
  // that id, never an address from elsewhere, and authenticated on every call), in two
  // halves so that no thread waits while the tool runs. Connect readies the sandbox's
  // client and may block (the provisioner's lookup and a dial, once per sandbox, or
  // after a failure); ExecuteAsync starts the call and returns, and `done` gets a tool
  // result (tool errors included), or an error when the sandbox is unreachable or broke:
  // the caller treats it as lost. `done` runs on another thread (a gRPC thread) or, when
  // the call never started, on the caller's; it must be quick and must not block.
  // ExecuteAsync without a successful Connect first connects inline. The sandbox runs a
  // call id exactly once: asking again after a crash returns the first run's result.
  using ExecuteDone = std::function<void(Result<ToolOutcome>)>;
  [[nodiscard]] virtual Status Connect(const SandboxRef& sandbox) = 0;
  virtual void ExecuteAsync(const SandboxRef& sandbox, const std::string& call_id, const std::string& name,
                            const std::string& input_json, ExecuteDone done) = 0;
  // Stops call `call_id` in `sandbox` (an interrupt, docs/harness.md "Interrupts"): bash
  // kills its process group, and the call's ExecuteAsync gets its result, marked
  // cancelled. An id that has not reached the sandbox yet is stopped as it starts. May
  // block (a short RPC). Default: kUnimplemented.
  [[nodiscard]] virtual Status CancelCall(const SandboxRef& sandbox, const std::string& call_id) {
    (void)sandbox;
    (void)call_id;
    return Status::Unimplemented("this sandbox backend cannot stop a call");
  }
  // How a sandbox ended: {outcome ("oom", "lifetime", "crashed", "exited", "host_lost"),
  // detail}; waits up to 2 s for sandboxd to record the end of a sandbox whose link broke.
  virtual std::pair<std::string, std::string> HowItEnded(const SandboxRef& sandbox) = 0;
  [[nodiscard]] virtual Status Destroy(const SandboxRef& sandbox) = 0;
  // Pause stops the sandbox with its files kept (sinew-sandboxd's Pause: its memory and
  // CPU return to the host); FailedPrecondition where it cannot pause now (under runc, or
  // with `if_idle` under either runtime: while a process besides the agent runs in it),
  // Unimplemented where the backend cannot. Resume brings a paused sandbox back under the
  // same id (true), or leaves a running one as it is (false).
  [[nodiscard]] virtual Status Pause(const SandboxRef&, bool if_idle) {
    (void)if_idle;
    return Status::Unimplemented("this sandbox backend cannot pause sandboxes");
  }
  [[nodiscard]] virtual Result<bool> Resume(const SandboxRef&) { return false; }
  // False when the sandbox's host is known to be gone (its etcd registration ended, or
  // another process now answers under its id): the sandbox is lost without asking.
  virtual bool HostAlive(const SandboxRef& sandbox) { return !sandbox.id.empty(); }
  [[nodiscard]] virtual Status Health() = 0;
  virtual bool configured() const = 0;

  // For the sandbox API (api_sandboxes.cc), which works from a request thread and may
  // block. The default of both: kUnavailable (no sinew-sandboxd configured).
  //
  // A new sandbox for `request` (resources, owner, label, snapshot), claimed before this
  // returns; placed as Provision places, and with `request.from_snapshot` on the host
  // that holds that snapshot for the request's owner (kNotFound when none does).
  [[nodiscard]] virtual Result<Provisioned> ProvisionBlocking(const v1::ProvisionRequest& request) {
    (void)request;
    return Status::Unavailable("this harness has no sinew-sandboxd (config.sandboxd)");
  }
  // The provisioner of the host at `host_address` (Provisioned.host_address; "" with a
  // single sinew-sandboxd). Owned by the backend; lives as long as it.
  [[nodiscard]] virtual Result<sandbox::ProvisionerClient*> ProvisionerAt(const std::string& host_address) {
    (void)host_address;
    return Status::Unavailable("this harness has no sinew-sandboxd (config.sandboxd)");
  }
  // Every host's provisioner (one, with empty host_id and address, with a single
  // sinew-sandboxd; each registered host with etcd), for what spans the hosts (a tenant's
  // snapshots). Default: kUnavailable, as above.
  struct HostProvisioner {
    std::string host_id;
    std::string host_address;
    sandbox::ProvisionerClient* provisioner = nullptr;  // owned by the backend
  };
  [[nodiscard]] virtual Result<std::vector<HostProvisioner>> AllProvisioners() {
    return Status::Unavailable("this harness has no sinew-sandboxd (config.sandboxd)");
  }
};

}  // namespace sinew::harness
