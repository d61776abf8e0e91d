#include "sinew/session_store/shard_map.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "keys.h"
#include "sinew/coord/etcd_client.h"

namespace sinew::store {
namespace {

constexpr std::string_view kShardsDir = "shards/";
constexpr std::string_view kGenerationsDir = "generations/";

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool ValidShardId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::vector<std::string> SplitShards(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

std::string GenerationKey(int64_t from_ms) {
  std::string digits = std::to_string(from_ms);
  return std::string(kShardPrefix) + std::string(kGenerationsDir) +
         std::string(16 - std::min<size_t>(16, digits.size()), '0') + digits;
}

}  // namespace

Result<int64_t> SessionIdTimeMs(std::string_view session_id) {
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  int64_t ms = 0;
  for (size_t i = 0; i < 6; ++i) ms = (ms << 8) | static_cast<unsigned char>(raw[i]);
  return ms;
}

Result<ShardMap> ShardMap::FromKeys(const std::map<std::string, std::string>& keys) {
  ShardMap map;
  for (const auto& [key, value] : keys) {
    if (key.rfind(kShardPrefix, 0) != 0) continue;
    std::string_view rest = std::string_view(key).substr(kShardPrefix.size());
    if (rest.rfind(kShardsDir, 0) == 0) {
      const std::string id(rest.substr(kShardsDir.size()));
      if (!ValidShardId(id) || value.empty()) {
        return Status::InvalidArgument("shard map key " + key + " is not <shard id> -> host:port");
      }
      map.addresses_[id] = value;
    } else if (rest.rfind(kGenerationsDir, 0) == 0) {
      const std::string_view digits = rest.substr(kGenerationsDir.size());
      ShardGeneration g;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), g.from_unix_ms);
      if (ec != std::errc() || end != digits.data() + digits.size() || g.from_unix_ms < 0) {
        return Status::InvalidArgument("shard map key " + key + " does not end in a start time (ms)");
      }
      g.shards = SplitShards(value);
      std::sort(g.shards.begin(), g.shards.end());
      const bool distinct = std::adjacent_find(g.shards.begin(), g.shards.end()) == g.shards.end();
      if (g.shards.empty() || !distinct ||
          !std::all_of(g.shards.begin(), g.shards.end(), [](const std::string& s) { return ValidShardId(s); })) {
        return Status::InvalidArgument("shard map key " + key + " is not a list of distinct shard ids: '" +
                                       value + "'");
      }
      map.generations_.push_back(std::move(g));
    }
  }
  std::sort(map.generations_.begin(), map.generations_.end(),
            [](const ShardGeneration& a, const ShardGeneration& b) { return a.from_unix_ms < b.from_unix_ms; });
  for (const ShardGeneration& g : map.generations_) {
    for (const std::string& s : g.shards) {
      if (map.addresses_.count(s) == 0) {
        return Status::InvalidArgument("the shard map's generation from " + std::to_string(g.from_unix_ms) +
                                       " names shard '" + s + "', which has no address key");
      }
    }
  }
  return map;
}

Result<std::string> ShardMap::ShardOf(std::string_view session_id) const {
  if (generations_.empty()) return Status::FailedPrecondition("the store shard map is empty");
  SINEW_ASSIGN_OR_RETURN(int64_t ms, SessionIdTimeMs(session_id));
  // The last generation that started at or before the id was made; the first one for
  // ids older than every generation.
  auto it = std::upper_bound(generations_.begin(), generations_.end(), ms,
                             [](int64_t t, const ShardGeneration& g) { return t < g.from_unix_ms; });
  const ShardGeneration& g = it == generations_.begin() ? generations_.front() : *std::prev(it);
  return g.shards[Fnv1a(session_id) % g.shards.size()];
}

Status RegisterShard(coord::EtcdClient* etcd, const std::string& shard_id, const std::string& address,
                     std::chrono::milliseconds grace) {
  if (!ValidShardId(shard_id)) {
    return Status::InvalidArgument("shard id '" + shard_id + "' must be 1 to 64 of [A-Za-z0-9._-]");
  }
  SINEW_ASSIGN_OR_RETURN(coord::Listing listing, etcd->GetPrefix(kShardPrefix));
  std::map<std::string, std::string> keys;
  for (const auto& kv : listing.kvs) keys[kv.key] = kv.value;
  const std::string address_key = std::string(kShardPrefix) + std::string(kShardsDir) + shard_id;
  if (keys[address_key] != address) SINEW_RETURN_IF_ERROR(etcd->Put(address_key, address).status());
  keys[address_key] = address;
  SINEW_ASSIGN_OR_RETURN(ShardMap map, ShardMap::FromKeys(keys));
  std::vector<std::string> shards;
  int64_t from_ms = 0;
  if (!map.empty()) {
    shards = map.generations().back().shards;
    if (std::find(shards.begin(), shards.end(), shard_id) != shards.end()) return Status::Ok();
    from_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  (std::chrono::system_clock::now() + grace).time_since_epoch())
                  .count();
  }
  shards.push_back(shard_id);
  std::sort(shards.begin(), shards.end());
  std::string list;
  for (const auto& s : shards) list += (list.empty() ? "" : ",") + s;
  return etcd->Put(GenerationKey(from_ms), list).status();
}

}  // namespace sinew::store
