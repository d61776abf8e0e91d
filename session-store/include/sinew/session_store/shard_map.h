// Store shards (docs/scale-out.md, "Store shards"): sessions spread over several
// sinew-store processes by session id, the map in etcd.
//
// The map is two sets of durable keys (no lease: a shard that is down stays in the map):
//   /sinew/store-shards/shards/<shard id>         -> "host:port" (its current address)
//   /sinew/store-shards/generations/<from_ms:016> -> "a,b,c" (shard ids)
// A session belongs to the generation in force when its id was made (the id's first 6
// bytes are its creation time in ms; the first generation starts at 0, so the sessions
// of a store that existed before sharding belong to it) and, within it, to shard
// shards[FNV-1a(id) % shards.size()]. Adding a shard writes a new generation that starts
// a grace period in the future, so every client sees it before it applies: no existing
// session ever changes shard, and the mapping is a pure function of the id and the keys.
//
// Thread-safety: ShardMap is an immutable value.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/session_store/session_store.h"
#include "sinew/status.h"

namespace sinew::coord {
class EtcdClient;
}

namespace sinew::store {

inline constexpr std::string_view kShardPrefix = "/sinew/store-shards/";

struct ShardGeneration {
  int64_t from_unix_ms = 0;
  std::vector<std::string> shards;  // sorted, distinct
};

class ShardMap {
 public:
  // From the keys under kShardPrefix (full key -> value). Errors: kInvalidArgument naming
  // a key that does not parse, or a generation naming a shard without an address.
  [[nodiscard]] static Result<ShardMap> FromKeys(const std::map<std::string, std::string>& keys);

  bool empty() const { return generations_.empty(); }
  // The shard of `session_id`. Errors: kInvalidArgument for a malformed id,
  // kFailedPrecondition for an empty map.
  [[nodiscard]] Result<std::string> ShardOf(std::string_view session_id) const;
  // Shard id -> address, every shard of every generation.
  const std::map<std::string, std::string>& addresses() const { return addresses_; }
  const std::vector<ShardGeneration>& generations() const { return generations_; }

 private:
  std::map<std::string, std::string> addresses_;
  std::vector<ShardGeneration> generations_;  // by from_unix_ms
};

// The creation time (ms) a session id carries. Errors: kInvalidArgument.
[[nodiscard]] Result<int64_t> SessionIdTimeMs(std::string_view session_id);

// Puts shard `shard_id` at `address` into the map in etcd: its address key (updated when
// it moved), and, when the newest generation lacks it, a new generation with it added,
// starting `grace` from now (the first generation starts at 0). Used by sinew-store's
// --etcd. Errors: kInvalidArgument for a shard id outside [A-Za-z0-9._-]{1,64}; etcd's.
[[nodiscard]] Status RegisterShard(coord::EtcdClient* etcd, const std::string& shard_id,
                                   const std::string& address, std::chrono::milliseconds grace);

// A SessionStore over the shards of the map in etcd at `etcd_endpoint`, kept current by
// a watch; each shard is reached with ConnectSessionStore(address, options). Calls about
// one session go to its shard (a session not found there is looked for on the other
// shards, for a client that created it with a map older than the grace period allowed);
// CreateSession makes the id itself and sends it as routed_session_id (one the caller
// gave, a sub-agent's derived id, goes to that id's shard); ListSessions
// merges the shards' pages newest first. Checkpoint is kUnimplemented (checkpoint each
// shard's store). Waits up to `options.connect_timeout` for the map; kUnavailable when
// etcd does not answer or the map is empty. `etcd_tls`: TLS to etcd with a client
// certificate (default: plain).
[[nodiscard]] Result<std::unique_ptr<SessionStore>> ConnectShardedSessionStore(
    const std::string& etcd_endpoint, const RemoteOptions& options = {},
    const GrpcTlsOptions& etcd_tls = {});

}  // namespace sinew::store
