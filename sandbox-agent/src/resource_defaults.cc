#include "sinew/sandbox/resource_defaults.h"

#include <algorithm>

namespace sinew::sandbox {

v1::Resources FillResourceDefaults(const v1::Resources& requested, const v1::Resources& defaults) {
  v1::Resources r = requested;
  if (r.cpu_millicores() == 0) r.set_cpu_millicores(defaults.cpu_millicores());
  if (r.memory_limit_bytes() == 0) r.set_memory_limit_bytes(defaults.memory_limit_bytes());
  if (r.memory_guaranteed_bytes() == 0) {
    r.set_memory_guaranteed_bytes(
        defaults.memory_guaranteed_bytes() != 0
            ? std::min(defaults.memory_guaranteed_bytes(), r.memory_limit_bytes())
            : r.memory_limit_bytes());
  }
  if (r.pids_limit() == 0) r.set_pids_limit(defaults.pids_limit());
  if (r.workspace_bytes() == 0) r.set_workspace_bytes(defaults.workspace_bytes());
  if (r.lifetime_seconds() == 0) r.set_lifetime_seconds(defaults.lifetime_seconds());
  if (r.network().empty()) r.set_network(defaults.network());
  if (r.image().empty()) r.set_image(defaults.image());
  if (r.runtime().empty()) r.set_runtime(defaults.runtime().empty() ? "runc" : defaults.runtime());
  return r;
}

}  // namespace sinew::sandbox
