// The placement rule (see placement.h).
#include "placement.h"

#include <algorithm>
#include <map>

#include "sinew/sandbox/resource_defaults.h"

namespace sinew::harness {

v1::Resources FillResources(const v1::Resources& requested, const v1::Resources& defaults) {
  return sandbox::FillResourceDefaults(requested, defaults);
}

namespace {

double Ratio(double used, double capacity) { return capacity > 0 ? used / capacity : 1.0; }

// What one host holds once this harness's pending placements are counted.
struct Effective {
  uint64_t memory = 0;
  uint64_t cpu = 0;
  uint64_t running = 0;
  std::map<std::string, uint32_t> warm;  // serialized shape -> warm sandboxes left
};

Effective Count(const HostLoad& h) {
  Effective e;
  e.memory = h.record.memory_reserved_bytes();
  e.cpu = h.record.cpu_reserved_millicores();
  e.running = h.record.running();
  for (const auto& s : h.record.shapes()) e.warm[s.resources().SerializeAsString()] += s.warm();
  for (const auto& p : h.pending) {
    auto it = e.warm.find(p.SerializeAsString());
    if (it != e.warm.end() && it->second > 0) {
      --it->second;  // it will take (or took) a warm one: it moves from warm to running
    } else {
      e.memory += p.memory_guaranteed_bytes();
      e.cpu += p.cpu_millicores();
    }
    ++e.running;
  }
  return e;
}

}  // namespace

Placement PlaceSandbox(const v1::Resources& requested, const std::vector<HostLoad>& hosts) {
  Placement out;
  for (const auto& h : hosts) {
    const auto& rec = h.record;
    const v1::Resources need = FillResources(requested, rec.defaults());
    const Effective e = Count(h);
    PlacementCandidate c;
    c.host_id = rec.host_id();
    c.address = rec.address();
    auto w = e.warm.find(need.SerializeAsString());
    c.warm = w != e.warm.end() && w->second > 0;
    c.load = std::max(
        {Ratio(static_cast<double>(e.memory), static_cast<double>(rec.memory_capacity_bytes())),
         Ratio(static_cast<double>(e.cpu), rec.cpu_capacity_millicores()),
         Ratio(static_cast<double>(e.running), rec.max_sandboxes())});
    if (!c.warm) {
      std::string why;
      if (e.memory + need.memory_guaranteed_bytes() > rec.memory_capacity_bytes()) {
        why = "memory: " + std::to_string(need.memory_guaranteed_bytes()) + " bytes guaranteed, " +
              std::to_string(rec.memory_capacity_bytes() -
                             std::min(e.memory, rec.memory_capacity_bytes())) +
              " free";
      } else if (e.cpu + need.cpu_millicores() > rec.cpu_capacity_millicores()) {
        why = "cpu: " + std::to_string(need.cpu_millicores()) + " millicores, " +
              std::to_string(rec.cpu_capacity_millicores() -
                             std::min<uint64_t>(e.cpu, rec.cpu_capacity_millicores())) +
              " free";
      } else if (e.running + 1 > rec.max_sandboxes()) {
        why = "sandboxes: " + std::to_string(rec.max_sandboxes()) + " at most";
      }
      if (!why.empty()) {
        out.refused.push_back(rec.host_id() + ": " + why);
        continue;
      }
    }
    out.ranked.push_back(std::move(c));
  }
  std::sort(out.ranked.begin(), out.ranked.end(),
            [](const PlacementCandidate& a, const PlacementCandidate& b) {
              if (a.warm != b.warm) return a.warm;
              if (a.load != b.load) return a.load < b.load;
              return a.host_id < b.host_id;
            });
  return out;
}

}  // namespace sinew::harness
