// `sinew-storectl shards` output: the shard states (shard_status.h) as a table for people
// or as one JSON object (docs/cli.md has both shapes).
#pragma once

#include <string>
#include <vector>

#include "shard_status.h"

namespace sinew::store {

// One line per member (primary, then followers; a shard that is not replicated is one
// `single` line), then one line per replicated shard: its mode and last failover.
std::string ShardStatesTable(const std::vector<ShardState>& shards);
// {"shards":[{"id","address","replicated","primary","term","last_term","mode",
//   "latest_sequence","followers":[{"member","synced_sequence","lag"}],
//   "last_failover":{"term","member","at_unix_ms","previous_term","previous_member"}|null,
//   "elections":[{"term","member","at_unix_ms"}],"error"}]}
std::string ShardStatesJson(const std::vector<ShardState>& shards);

}  // namespace sinew::store
