// ShardMember: one sinew-store of a replicated shard (docs/session-store.md, "Replicating
// a shard"). Members campaign for the shard's primary key in etcd
// (/sinew/store-primaries/<shard>, held under an etcd lease; its creation revision is the
// term). The winner opens its directory as the primary, registers its address as the
// shard's in the shard map and serves; the others follow it and campaign again when the
// key goes (the primary's lease ran out). Each member that does not lead publishes how far
// its directory goes (/sinew/store-primaries/<shard>/members/<address>, under its own
// lease); a member campaigns only when no live member still follows or, complete for the
// same term, holds more, so the most advanced live member leads. A primary that cannot
// renew its lease stops acknowledging a second before the lease's TTL ends, and the
// process exits: it is deposed, and when it starts again it sets its directory aside (it
// may hold writes nobody acknowledged) and follows the new primary from an empty one.
//
// Each primary also records where its term's log began
// (/sinew/store-primaries/<shard>/start); a member that holds more than that from an
// older term sets its directory aside before it follows (its copy would differ from the
// primary's from there on).
//
// Thread-safety: store() and replication_service() are served from gRPC threads while
// Run() campaigns on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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
    int64_t member_ttl_seconds = 5;  // the lease of this member's published progress
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
  class Progress;

  Status Lead(int64_t lease_id, int64_t term, const std::atomic<bool>* stop);
  Status Follow(const coord::KeyValue& primary, const std::atomic<bool>* stop);
  // Moves the directory aside when it was a primary's at an older term.
  Status SetAsideIfDeposed(int64_t current_term);
  // The sequence number the primary of `term` started from (published when it began to
  // lead); nullopt until it has.
  std::optional<uint64_t> TermStart(int64_t term);
  // Moves the directory aside when it holds more than `start`, where `term` began: the
  // rest is writes of an older term the primary never had (nobody acknowledged them, or
  // they were lost with two members at once), and its copy would differ from there on.
  Status SetAsideIfAhead(int64_t term, uint64_t start);

  coord::EtcdClient* etcd_;
  const Options options_;
  const std::string key_;
  std::string advertise_;
  std::function<Status()> on_lead_;
  std::unique_ptr<Switch> switch_;
  std::unique_ptr<ForwardingReplication> replication_;
  std::unique_ptr<Progress> progress_;  // used by Run's thread only
};

// A member's published progress, as another member reads it.
struct MemberProgress {
  std::string name;        // its address
  int64_t term = 0;        // the term its directory is complete for
  uint64_t sequence = 0;   // the last sequence number its directory holds
  bool campaigning = false;  // false: it still follows a primary, its sequence may grow
};

// Whom a member holding `sequence` at `term` waits for before it campaigns: the first
// of `others` that still follows (its record may lag behind its copy) or that is complete
// for the same term and holds more. Empty: it may campaign. `others` leaves out the
// member itself and the last primary.
std::string WaitsFor(const std::vector<MemberProgress>& others, int64_t term, uint64_t sequence);

}  // namespace sinew::store
