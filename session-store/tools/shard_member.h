// ShardMember: one sinew-store of a replicated shard (docs/session-store.md, "Replicating
// a shard"). Members campaign for the shard's primary key in etcd
// (/sinew/store-primaries/<shard>, held under an etcd lease; its creation revision is the
// term). The winner opens its directory as the primary, registers its address as the
// shard's in the shard map and serves; the others follow it and campaign again when the
// key goes (the primary's lease ran out). A primary that cannot renew its lease stops
// acknowledging a second before the lease's TTL ends, and the process exits: it is
// deposed, and when it starts again it sets its directory aside (it may hold writes
// nobody acknowledged) and follows the new primary from an empty one.
//
// Thread-safety: store() and replication_service() are served from gRPC threads while
// Run() campaigns on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "sinew/coord/etcd_client.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/session_store/replication.h"
#include "sinew/session_store/session_store.h"

namespace sinew::store {

class ShardMember {
 public:
  struct Options {
    std::string db;         // this member's store directory
    std::string shard_id;   // the shard it belongs to
    StoreOptions store;
    PrimaryOptions primary;
    GrpcTlsOptions follow_tls;  // to the primary, when following
    int64_t ttl_seconds = 5;    // the primary key's etcd lease
  };

  ShardMember(coord::EtcdClient* etcd, Options options);
  ~ShardMember();

  // Before Run: the address clients and followers dial for this member, and what to do
  // once it leads, before it acknowledges anything (register it in the shard map).
  void SetAdvertise(std::string advertise, std::function<Status()> on_lead);

  // The store gRPC serves: the primary's while this member leads; otherwise every call
  // fails kUnavailable naming the primary.
  SessionStore* store();
  // The replication service gRPC serves (followers of this member, while it leads).
  v1::StoreReplication::Service* replication_service();
  // The primary while this member leads; null while it follows or campaigns.
  std::shared_ptr<Primary> primary();

  // Campaigns, leads and follows until *stop is set (returns then) or this member is
  // deposed (returns kAborted: the process must end).
  Status Run(const std::atomic<bool>* stop);

 private:
  class Switch;
  class ForwardingReplication;

  Status Lead(int64_t lease_id, int64_t term, const std::atomic<bool>* stop);
  Status Follow(const coord::KeyValue& primary, const std::atomic<bool>* stop);
  // Moves the directory aside when it was a primary's at an older term.
  Status SetAsideIfDeposed(int64_t current_term);

  coord::EtcdClient* etcd_;
  const Options options_;
  const std::string key_;
  std::string advertise_;
  std::function<Status()> on_lead_;
  std::unique_ptr<Switch> switch_;
  std::unique_ptr<ForwardingReplication> replication_;
};

}  // namespace sinew::store
