// The tools the harness offers a model: sandbox tools (run inside a runc sandbox by
// sinew-sandbox-agent) and proxy tools (run here, in the harness, where the secrets are).
//
// Thread-safety: the catalog is immutable; ProxyTools and SandboxBackend may be used
// from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "async.h"
#include "curl_http.h"
#include "sinew/harness/config.h"
#include "sinew/harness/model_client.h"
#include "sinew/harness/vault.h"
#include "sinew/status.h"

namespace sinew::harness {

struct ToolInfo {
  std::string name;
  std::string description;
  std::string input_schema_json;
  bool idempotent = false;
  bool needs_sandbox = true;
};

// Every tool the harness knows, sandbox tools first (they mirror sinew-sandbox-agent).
const std::vector<ToolInfo>& ToolCatalog();
const ToolInfo* FindTool(const std::string& name);
// Whether this particular call may be re-run after a crash (http_request: GET/HEAD only).
bool CallIsIdempotent(const ToolInfo& tool, const std::string& input_json);
std::vector<ToolDefinition> ToolDefinitions(const std::vector<std::string>& names);

struct ToolOutcome {
  std::string output;
  bool is_error = false;
  int32_t exit_status = 0;
  int32_t signal = 0;
  bool timed_out = false;  // bash: its timeout fired
  bool truncated = false;
  int64_t duration_ms = 0;
};

// Proxy tools: http_request with a per-host allowlist and credential injection.
class ProxyTools {
 public:
  ProxyTools(std::vector<HttpAllowEntry> allow, const Vault* vault)
      : allow_(std::move(allow)), vault_(vault) {}
  // Runs a proxy tool without holding a thread while its request is out (libcurl's multi
  // interface on the tools' own HTTP thread, started at the first call): `done` gets the
  // outcome there, or at once for input refused before any request; it must be quick and
  // must not block. Failures are outcomes with is_error (for the model). `cancelled`
  // (may be null) stops the request within about a second.
  using Done = std::function<void(ToolOutcome)>;
  void ExecuteAsync(const std::string& name, const std::string& input_json, const std::atomic<bool>* cancelled,
                    Done done) const;
  // Ends the requests still out (their `done` gets a cancelled outcome) and joins the
  // HTTP thread; later calls are answered at once as cancelled. Idempotent.
  void Shutdown();

 private:
  // The request an http_request input asks for (allow list checked, credential added), or
  // the error outcome that refuses it.
  std::variant<HttpRequest, ToolOutcome> HttpRequestFor(const std::string& input_json) const;
  ToolOutcome HttpRequestOutcome(const Result<HttpResponse>& response,
                                 std::chrono::steady_clock::time_point start) const;
  http::AsyncClient& Http() const;
  const std::vector<HttpAllowEntry> allow_;
  const Vault* vault_;  // not owned; outlives this
  mutable std::once_flag http_once_;
  mutable std::unique_ptr<http::AsyncClient> http_;
};

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
  // How a sandbox ended: {outcome ("oom", "lifetime", "crashed", "exited", "host_lost"),
  // detail}; waits up to 2 s for sandboxd to record the end of a sandbox whose link broke.
  virtual std::pair<std::string, std::string> HowItEnded(const SandboxRef& sandbox) = 0;
  [[nodiscard]] virtual Status Destroy(const SandboxRef& sandbox) = 0;
  // False when the sandbox's host is known to be gone (its etcd registration ended, or
  // another process now answers under its id): the sandbox is lost without asking.
  virtual bool HostAlive(const SandboxRef& sandbox) { return !sandbox.id.empty(); }
  [[nodiscard]] virtual Status Health() = 0;
  virtual bool configured() const = 0;
};

}  // namespace sinew::harness
