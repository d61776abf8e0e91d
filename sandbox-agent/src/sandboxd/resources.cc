#include <regex>

#include "sandboxd/sandbox_manager.h"
#include "sinew/sandbox/resource_defaults.h"

namespace sinew::sandbox {

namespace {

Status OutOfRange(const std::string& field, uint64_t value, uint64_t min, uint64_t max) {
  return Status::InvalidArgument("resources." + field + " = " + std::to_string(value) +
                                 " is out of range [" + std::to_string(min) + ", " +
                                 std::to_string(max) + "]");
}

}  // namespace

Result<v1::Resources> NormalizeResources(const v1::Resources& requested,
                                         const v1::Resources& defaults) {
  v1::Resources r = FillResourceDefaults(requested, defaults);

  if (r.cpu_millicores() < 10 || r.cpu_millicores() > 256000)
    return OutOfRange("cpu_millicores", r.cpu_millicores(), 10, 256000);
  constexpr uint64_t kMiB = 1ull << 20;
  if (r.memory_limit_bytes() < 16 * kMiB || r.memory_limit_bytes() > (1ull << 42)) {
    return OutOfRange("memory_limit_bytes", r.memory_limit_bytes(), 16 * kMiB, 1ull << 42);
  }
  if (r.memory_guaranteed_bytes() > r.memory_limit_bytes()) {
    return Status::InvalidArgument(
        "resources.memory_guaranteed_bytes (" + std::to_string(r.memory_guaranteed_bytes()) +
        ") exceeds memory_limit_bytes (" + std::to_string(r.memory_limit_bytes()) + ")");
  }
  if (r.pids_limit() < 32 || r.pids_limit() > 65536)
    return OutOfRange("pids_limit", r.pids_limit(), 32, 65536);
  if (r.workspace_bytes() < kMiB || r.workspace_bytes() > (1ull << 40)) {
    return OutOfRange("workspace_bytes", r.workspace_bytes(), kMiB, 1ull << 40);
  }
  if (r.lifetime_seconds() > 7 * 24 * 3600)
    return OutOfRange("lifetime_seconds", r.lifetime_seconds(), 1, 7 * 24 * 3600);
  if (r.runtime() != "runc" && r.runtime() != "runsc") {
    return Status::InvalidArgument("resources.runtime '" + r.runtime() +
                                   "' is not supported; use \"runc\" or \"runsc\" (gVisor)");
  }
  if (r.network() != "none") {
    return Status::InvalidArgument(
        "resources.network '" + r.network() +
        "' is not supported; the only network is \"none\" (loopback only)");
  }
  static const std::regex kImageName("[a-z0-9][a-z0-9._-]{0,63}");
  if (!std::regex_match(r.image(), kImageName)) {
    return Status::InvalidArgument("resources.image '" + r.image() +
                                   "' is not a valid image name ([a-z0-9._-])");
  }
  return r;
}

}  // namespace sinew::sandbox
