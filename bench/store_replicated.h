// bench_store's replicated figures: real sinew-store processes on loopback.
#pragma once

#include <string>
#include <vector>

namespace sinew::bench {

// Appends through sinew-store at each writer count (one session per writer, one client),
// for an unreplicated sync store, a sync primary with one follower and an async primary
// with one follower, side by side: appends/s, p50 and p99 latency, and each replicated
// mode's throughput as a ratio of the unreplicated one's; in async mode, the follower's lag
// sampled every 5 ms; then the unreplicated store's restart time. Directories go under
// `dir`, the followers' under `follower_root` when it is set (another disk, a tmpfs).
void ReplicatedAppends(const std::string& dir, const std::vector<int>& writer_counts,
                       double seconds, const std::string& follower_root);

// `count` failovers of a two-member shard elected through a real etcd (primary lease
// `lease_seconds`): the primary is SIGKILLed (and its directory deleted, a new member
// with an empty one taking its place) while a client retries one append every 20 ms;
// prints p50/p99 of the time from the kill to the new primary in etcd and to the
// client's acknowledged append. Prints why when etcd is missing.
void Failovers(const std::string& dir, int count, int lease_seconds);

}  // namespace sinew::bench
