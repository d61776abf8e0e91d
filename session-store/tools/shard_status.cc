#include "shard_status.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

#include "sinew/grpc_status.h"
#include "sinew/grpc_tls.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/session_store/shard_map.h"

namespace sinew::store {
namespace {

constexpr std::string_view kPrimaries = "/sinew/store-primaries/";
constexpr std::string_view kElections = "/sinew/store-elections/";

std::string ElectionKey(const std::string& shard_id, int64_t term) {
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%020lld", static_cast<long long>(term));
  return std::string(kElections) + shard_id + "/" + digits;  // zero-padded: key order is term order
}

// The primary's view of its followers, into `shard`.
void AskPrimary(ShardState* shard, const GrpcTlsOptions& tls, std::chrono::milliseconds timeout) {
  auto channel = GrpcChannel(shard->primary, tls);
  if (!channel.ok()) {
    shard->error = channel.status().ToString();
    return;
  }
  auto stub = v1::StoreReplication::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ReplicationStatus status;
  if (grpc::Status s = stub->GetReplicationStatus(&ctx, {}, &status); !s.ok()) {
    shard->error = "the primary at " + shard->primary +
                   " did not give its status: " + FromGrpcStatus(s).ToString();
    return;
  }
  shard->mode = status.mode();
  shard->latest_sequence = status.latest_sequence();
  for (const auto& f : status.followers()) {
    const uint64_t synced = f.synced_sequence();
    shard->followers.push_back(
        {f.name(), synced,
         status.latest_sequence() > synced ? status.latest_sequence() - synced : 0, f.in_sync()});
  }
  std::sort(shard->followers.begin(), shard->followers.end(),
            [](const ReplicaState& a, const ReplicaState& b) { return a.member < b.member; });
}

}  // namespace

Status RecordElection(coord::EtcdClient* etcd, const std::string& shard_id, int64_t term,
                      const std::string& member, int64_t at_unix_ms) {
  boost::json::object record{{"term", term}, {"member", member}, {"at_unix_ms", at_unix_ms}};
  SINEW_ASSIGN_OR_RETURN(auto written,
                         etcd->Put(ElectionKey(shard_id, term), boost::json::serialize(record)));
  (void)written;
  SINEW_ASSIGN_OR_RETURN(auto listing, etcd->GetPrefix(std::string(kElections) + shard_id + "/"));
  for (size_t i = 0; i + kKeptElections < listing.kvs.size(); ++i) {  // oldest first
    SINEW_ASSIGN_OR_RETURN(auto deleted, etcd->Delete(listing.kvs[i].key));
    (void)deleted;
  }
  return Status::Ok();
}

Result<std::vector<ShardState>> ReadShardStates(coord::EtcdClient* etcd, const GrpcTlsOptions& tls,
                                                std::chrono::milliseconds timeout) {
  std::map<std::string, ShardState> shards;
  auto state = [&](const std::string& id) -> ShardState& {
    ShardState& s = shards[id];
    s.id = id;
    return s;
  };
  SINEW_ASSIGN_OR_RETURN(auto map_keys, etcd->GetPrefix(kShardPrefix));
  std::map<std::string, std::string> keys;
  for (const auto& kv : map_keys.kvs) keys[kv.key] = kv.value;
  SINEW_ASSIGN_OR_RETURN(auto map, ShardMap::FromKeys(keys));
  for (const auto& [id, address] : map.addresses()) state(id).address = address;

  SINEW_ASSIGN_OR_RETURN(auto primaries, etcd->GetPrefix(kPrimaries));
  for (const auto& kv : primaries.kvs) {
    std::string rest = kv.key.substr(kPrimaries.size());
    constexpr std::string_view kLast = "/last";
    if (rest.size() > kLast.size() && rest.ends_with(kLast)) {
      ShardState& s = state(rest.substr(0, rest.size() - kLast.size()));
      s.replicated = true;
      s.last_term = kv.mod_revision;
    } else if (!rest.empty() && rest.find('/') == std::string::npos) {
      ShardState& s = state(rest);
      s.replicated = true;
      s.primary = kv.value;
      s.term = kv.create_revision;
    }
  }
  SINEW_ASSIGN_OR_RETURN(auto elections, etcd->GetPrefix(kElections));
  for (const auto& kv : elections.kvs) {
    const std::string rest = kv.key.substr(kElections.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) continue;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(kv.value, ec);
    if (ec || !v.is_object()) continue;  // not ours to judge: skip what does not parse
    const auto& o = v.as_object();
    Election e;
    if (const auto* t = o.if_contains("term"); t && t->is_int64()) e.term = t->as_int64();
    if (const auto* m = o.if_contains("member"); m && m->is_string())
      e.member = std::string(m->as_string());
    if (const auto* at = o.if_contains("at_unix_ms"); at && at->is_int64())
      e.at_unix_ms = at->as_int64();
    ShardState& s = state(rest.substr(0, slash));
    s.replicated = true;
    s.elections.push_back(std::move(e));
  }
  std::vector<ShardState> out;
  for (auto& [id, s] : shards) {
    std::sort(s.elections.begin(), s.elections.end(),
              [](const Election& a, const Election& b) { return a.term > b.term; });
    if (s.replicated && !s.primary.empty()) AskPrimary(&s, tls, timeout);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sinew::store
