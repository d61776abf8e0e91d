// The tools the harness offers a model: sandbox tools (run inside a runc sandbox by
// sinew-sandbox-agent) and proxy tools (run here, in the harness, where the secrets are).
//
// Thread-safety: the catalog is immutable; ProxyTools and SandboxBackend may be used
// from many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
  // Runs a proxy tool; failures are outcomes with is_error (for the model).
  ToolOutcome Execute(const std::string& name, const std::string& input_json,
                      const std::atomic<bool>* cancelled) const;

 private:
  ToolOutcome HttpRequestTool(const std::string& input_json, const std::atomic<bool>* cancelled) const;
  const std::vector<HttpAllowEntry> allow_;
  const Vault* vault_;  // not owned; outlives this
};

// The hands, seen from the harness: provisions sandboxes through sinew-sandboxd and
// runs tools in them.
class SandboxBackend {
 public:
  virtual ~SandboxBackend() = default;
  // `address` of sinew-sandboxd; "" gives a backend whose every call fails clearly.
  // `tls`: mTLS to sinew-sandboxd (config.grpc_tls). Default: plain gRPC
  static std::unique_ptr<SandboxBackend> Create(const std::string& address, const GrpcTlsOptions& tls = {});

  struct Provisioned {
    std::string id;
    std::string endpoint;
    std::string resources_json;
    int64_t provision_ms = 0;
    bool from_warm_pool = false;
  };
  // `spec_json`: the task's "sandbox" object (may be empty).
  [[nodiscard]] virtual Result<Provisioned> Provision(const std::string& spec_json,
                                                      const std::string& label) = 0;
  // Runs tool call `call_id` in sandbox `sandbox_id` (reached through the provisioner's
  // answer for that id, never an address from elsewhere, and authenticated on every call).
  // The sandbox runs a call id exactly once: asking again after a crash returns the
  // first run's result. A tool result (tool errors included), or an error when the
  // sandbox is unreachable or broke: the caller treats it as lost.
  [[nodiscard]] virtual Result<ToolOutcome> Execute(const std::string& sandbox_id,
                                                    const std::string& call_id,
                                                    const std::string& name,
                                                    const std::string& input_json) = 0;
  // How a sandbox ended: {outcome ("oom", "lifetime", "crashed", "exited"), detail}; waits
  // up to 2 s for sandboxd to record the end of a sandbox whose link broke.
  virtual std::pair<std::string, std::string> HowItEnded(const std::string& id) = 0;
  [[nodiscard]] virtual Status Destroy(const std::string& id) = 0;
  [[nodiscard]] virtual Status Health() = 0;
  virtual bool configured() const = 0;
};

}  // namespace sinew::harness
