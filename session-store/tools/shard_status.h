// What `sinew-storectl shards` shows (docs/session-store.md, "Operations of a replicated
// shard"): each store shard's address from the shard map and, for a replicated shard, its
// primary and term (/sinew/store-primaries/<shard>), the last term that ended
// (/sinew/store-primaries/<shard>/last), the elections the members recorded
// (/sinew/store-elections/<shard>/<term>: who led from when), and the primary's own view
// of its followers (GetReplicationStatus): each follower's synced sequence and lag.
//
// Thread-safety: free functions; the client is the caller's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sinew/coord/etcd_client.h"
#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::store {

// One election of a shard's primary, as the winner recorded it once it led.
struct Election {
  int64_t term = 0;
  std::string member;      // the winner's address
  int64_t at_unix_ms = 0;  // when it started to lead
};

struct ReplicaState {
  std::string member;  // the follower's name: a member's advertised address
  uint64_t synced_sequence = 0;
  uint64_t lag = 0;  // the primary's last sequence minus synced_sequence
  bool in_sync = false;  // counts for the primary's sync acknowledgements (FollowerStatus)
};

struct ShardState {
  std::string id;
  std::string address;      // in the shard map ("" when the shard is not in it)
  bool replicated = false;  // has a primary key, or ever had one
  std::string primary;      // "" while none holds the key (an election under way)
  int64_t term = 0;         // the primary key's creation revision; 0 without one
  int64_t last_term = 0;    // the newest term that a member won (the `last` key's revision)
  std::string mode;         // "sync"/"async", from the primary; "" when it did not answer
  uint64_t latest_sequence = 0;
  std::vector<ReplicaState> followers;
  std::vector<Election> elections;  // newest first, as many as are kept
  std::string error;                // why the primary's status is missing ("" when it answered)
};

// How many elections of a shard are kept in etcd.
inline constexpr int kKeptElections = 16;

// Writes the election of `member` at `term` for `shard_id` and deletes all but the newest
// kKeptElections. Errors: etcd's.
[[nodiscard]] Status RecordElection(coord::EtcdClient* etcd, const std::string& shard_id,
                                    int64_t term, const std::string& member, int64_t at_unix_ms);

// Every shard in the map or with a primary key, sorted by id; each replicated primary is
// asked for its status (over `tls` when set, `timeout` each). Errors: etcd's, and
// kInvalidArgument for a map that does not parse.
[[nodiscard]] Result<std::vector<ShardState>> ReadShardStates(coord::EtcdClient* etcd,
                                                              const GrpcTlsOptions& tls,
                                                              std::chrono::milliseconds timeout);

}  // namespace sinew::store
