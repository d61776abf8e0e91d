// Replicating a store shard (docs/session-store.md, "Replicating a shard"): a primary
// streams every committed RocksDB write batch, in order, to its followers; a follower
// applies them to its own directory, which then holds the same store: a `sinew-store`
// opened on a follower's directory serves every write the primary acknowledged (in
// synchronous mode) with the same sequence numbers.
//
//   auto primary = OpenPrimaryStore("data/store", {}, {.mode = ReplicationMode::kSync});
//   builder.RegisterService(primary->service());   // beside NewStoreService(primary->store())
//   auto follower = Follower::Start("data/replica", "10.0.0.7:7701", {.name = "replica-1"});
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinew/grpc_tls_options.h"
#include "sinew/session_store/session_store.h"
#include "sinew/status.h"

namespace sinew::store {

enum class ReplicationMode {
  // A write is acknowledged once one in-sync follower (FollowerStatus::in_sync) has
  // synced it to its disk.
  kSync,
  // A write is acknowledged after the primary's own write; followers lag behind.
  kAsync,
};

struct PrimaryOptions {
  // Default: kSync
  ReplicationMode mode = ReplicationMode::kSync;
  // kSync: how long a write waits for a follower before it fails kUnavailable. Such a
  // write stays in the primary's log (a read may see it); a retry with the same
  // idempotency key returns it once a follower has synced it. Also: an in-sync follower
  // that syncs nothing for this long while it has batches to sync (its link may be cut
  // without a word) is no longer in sync until it has synced what the log held then.
  // Default: 10 s
  std::chrono::milliseconds follower_timeout{10000};
  // kSync with no in-sync follower: false fails each write after follower_timeout
  // (the shard blocks writes); true acknowledges it after the local write, as kAsync does,
  // and logs each change between the two. Default: false
  bool degrade_when_alone = false;
  // How long the primary keeps write-ahead log files for followers that fall behind or
  // reconnect; a follower that needs an older batch is seeded from a checkpoint instead.
  // Default: 1 h
  std::chrono::seconds wal_ttl{3600};
};

struct FollowerStatus {
  std::string name;             // as the follower gave it
  uint64_t synced_sequence = 0;  // the last batch it has synced (RocksDB sequence number)
  // It has synced everything this primary had written when its stream began; only such
  // a follower's fsync acknowledges a write in kSync mode.
  bool in_sync = false;
};

// A store with followers: writes through store() are replicated as PrimaryOptions say.
// Lease renewals are the exception: they are not waited for (losing one in a failover only
// shortens a lease).
class Primary {
 public:
  virtual ~Primary() = default;
  // The store to serve (NewStoreService) and to use; owned by this object.
  virtual SessionStore* store() = 0;
  // The sinew.v1.StoreReplication service followers call; owned by this object.
  virtual grpc::Service* service() = 0;
  // The last sequence number written here.
  virtual uint64_t LatestSequence() = 0;
  // The followers streaming from this primary now.
  virtual std::vector<FollowerStatus> Followers() = 0;
  // kSync with degrade_when_alone, and no follower was in sync at the last write: writes
  // are acknowledged without one.
  virtual bool Degraded() = 0;
};

// Opens (or creates) the store at `dir` as a primary. Errors as OpenSessionStore.
[[nodiscard]] Result<std::unique_ptr<Primary>> OpenPrimaryStore(const std::string& dir,
                                                                const StoreOptions& options,
                                                                const PrimaryOptions& primary);

// The last RocksDB sequence number the store at `dir` holds (how far a member's copy
// goes); 0 when `dir` holds no store. Opens it read-only: nothing may be writing it.
// Errors: those of OpenSessionStore.
[[nodiscard]] Result<uint64_t> StoredSequence(const std::string& dir);

struct FollowerOptions {
  // Sent to the primary; names this follower in its status and logs. Default: "follower"
  std::string name = "follower";
  // mTLS to the primary (docs/security.md). Default: none (plain gRPC)
  GrpcTlsOptions tls{};
  // Files of the directory (beside RocksDB's) that a seed keeps: when the directory is
  // replaced by a checkpoint of the primary, these are copied into the new one.
  // Default: none
  std::vector<std::string> keep_files{};
  // Called on the follower's thread once this directory holds everything the primary had
  // written when the stream began, before the follower acknowledges anything the primary
  // counts for kSync (so a member can record that its copy is complete before it is
  // needed to be). Called again after a reconnection. An error ends the stream.
  // Default: none
  std::function<Status()> on_caught_up{};
};

// Keeps a directory a copy of a primary's store.
class Follower {
 public:
  virtual ~Follower() = default;  // stops following and closes the directory
  // Opens (or creates) the store at `dir` and follows the primary at `primary_address`
  // (host:port) from the first batch `dir` lacks, reconnecting while the primary is
  // away. When the primary no longer keeps the log from there (a new follower of an old
  // primary, or one away longer than its wal_ttl), `dir` is replaced, in one rename, by a
  // checkpoint of the primary's store streamed over the replication service (every
  // file's size and SHA-256 checked), and following goes on from the checkpoint's end.
  // `dir`.seeding is the seed's scratch space. Errors: those of OpenSessionStore.
  [[nodiscard]] static Result<std::unique_ptr<Follower>> Start(const std::string& dir,
                                                              const std::string& primary_address,
                                                              const FollowerOptions& options);
  // The last batch applied and synced here.
  virtual uint64_t AppliedSequence() = 0;
  // Why the last stream ended (Ok while streaming or before the first); a batch out of
  // order or a seed that failed shows up here.
  virtual Status LastError() = 0;
};

}  // namespace sinew::store
