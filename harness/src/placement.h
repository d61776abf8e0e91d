// Placement of a new sandbox over the sandbox hosts registered in etcd
// (docs/scale-out.md). A pure function of the request and the hosts' records, so the
// rule is testable on its own:
//
//  1. A host is a candidate only if the request fits: it has a warm sandbox of exactly
//     the requested shape (handing it over needs nothing new), or the shape's guarantee
//     fits what is left — memory_reserved + guaranteed <= memory_capacity, cpu_reserved
//     + cpu <= cpu_capacity, and running < max_sandboxes. Reserved counts handed-out
//     sandboxes plus this harness's placements that the record does not show yet
//     (`pending`); warm sandboxes do not count (they wait to be handed over).
//  2. Candidates with a warm sandbox of the shape come first,
//  3. then the least loaded: load = max(memory_reserved / memory_capacity,
//     cpu_reserved / cpu_capacity, running / max_sandboxes), before this placement,
//  4. ties by host id.
// Zero fields of the request take the host's defaults (its record's `defaults`) before
// the shape is compared or its guarantee counted, as sinew-sandboxd itself does.
#pragma once

#include <string>
#include <vector>

#include "sinew/proto/coord.pb.h"

namespace sinew::harness {

struct HostLoad {
  v1::SandboxHostRecord record;
  // Shapes (filled) this harness placed on the host that its record does not count yet.
  std::vector<v1::Resources> pending;
};

struct PlacementCandidate {
  std::string host_id;
  std::string address;
  bool warm = false;  // a warm sandbox of the shape waits there
  double load = 0;
};

struct Placement {
  std::vector<PlacementCandidate> ranked;  // best first; empty when nothing fits
  std::vector<std::string> refused;        // "<host>: why" for each host that does not fit
};

// The request's zero fields filled from `defaults`, by the same rule sinew-sandboxd applies
// (sinew::sandbox::FillResourceDefaults).
v1::Resources FillResources(const v1::Resources& requested, const v1::Resources& defaults);

Placement PlaceSandbox(const v1::Resources& requested, const std::vector<HostLoad>& hosts);

}  // namespace sinew::harness
