// HostRegistration: announces this sinew-sandboxd in etcd for harnesses that place
// sandboxes over many hosts (docs/scale-out.md). It keeps
// /sinew/sandbox-hosts/<host_id> = SandboxHostRecord (proto/coord.proto, serialized)
// under a lease of `ttl_seconds`, rewrites it when the host's occupancy changes (checked
// every `poll`) and at least every `refresh`, and revokes the lease when destroyed (a
// clean stop removes the host at once; after a crash it goes when the TTL runs out).
//
// Ownership: borrows the manager, which must outlive this.
// Thread-safety: none needed; its own thread does the work.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "sandboxd/sandbox_manager.h"
#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::sandbox {

inline constexpr std::string_view kSandboxHostsPrefix = "/sinew/sandbox-hosts/";

struct HostRegistrationOptions {
  std::string etcd;       // etcd endpoint, host:port (REQUIRES: not empty)
  GrpcTlsOptions etcd_tls;  // TLS to etcd with a client certificate. Default: plain
  std::string host_id;    // REQUIRES: [A-Za-z0-9._-]{1,64}
  std::string advertise;  // Provisioner address harnesses dial, host:port (REQUIRES: not empty)
  // Lease TTL: how long a crashed host stays listed. Default: 5 s
  int64_t ttl_seconds = 5;
  // Capacity for sandboxes' guarantees. Default (0): MemTotal of /proc/meminfo
  uint64_t memory_capacity_bytes = 0;
  // Default (0): 1000 per online CPU
  uint32_t cpu_capacity_millicores = 0;
  // How often occupancy is compared with what was published. Default: 200 ms
  std::chrono::milliseconds poll = std::chrono::milliseconds(200);
  // The record is rewritten at least this often (updated_unix_ms). Default: 10 s
  std::chrono::milliseconds refresh = std::chrono::seconds(10);
};

class HostRegistration {
 public:
  // Registers (fails when etcd does not answer or an option is invalid) and starts the
  // refresh thread.
  [[nodiscard]] static Result<std::unique_ptr<HostRegistration>> Start(
      SandboxManager* manager, const ProvisionerConfig& config, HostRegistrationOptions options);
  virtual ~HostRegistration() = default;  // stops the thread and revokes the lease
};

// The record for this host now (without updated_unix_ms). Exposed for tests.
v1::SandboxHostRecord BuildHostRecord(SandboxManager& manager, const ProvisionerConfig& config,
                                      const HostRegistrationOptions& options);

}  // namespace sinew::sandbox
