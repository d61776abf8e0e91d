// EtcdClient: the few etcd v3 calls Sinew needs (proto/etcd/rpc.proto), over gRPC.
//
// Typical use:
//   auto etcd = EtcdClient::Connect("127.0.0.1:2379");
//   auto lease = (*etcd)->GrantLease(5);                    // {id, ttl}
//   (*etcd)->Put("/sinew/sandbox-hosts/a", bytes, lease->id);
//   auto listing = (*etcd)->GetPrefix("/sinew/sandbox-hosts/");
//
// Errors: etcd's gRPC status mapped to sinew::Status; kUnavailable when etcd does not
// answer (calls fail fast while it is down: they do not wait for it to come back).
// TLS: with GrpcTlsOptions set, the client checks etcd's certificate and name against
// `ca_file` and presents its own certificate (etcd's --client-cert-auth); the files are
// watched, so renewed certificates are used by the next connection (docs/security.md).
//
// Thread-safety: all methods may be called concurrently from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::coord {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: none
};

// Keys under a prefix and the store revision they were read at.
struct Listing {
  std::vector<KeyValue> kvs;  // in key order
  int64_t revision = 0;
};

struct Lease {
  int64_t id = 0;
  int64_t ttl_seconds = 0;
};

// One change seen by a watch.
struct WatchEvent {
  bool deleted = false;  // DELETE (also a lease expiring); otherwise PUT
  KeyValue kv;           // for DELETE: key and mod_revision only
};

// The end of [prefix, end) that covers every key starting with `prefix`.
std::string PrefixEnd(std::string_view prefix);

class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // A client for the etcd member at `endpoint` (host:port). Does not wait for etcd.
  // `call_timeout` bounds each unary call. Default: 5 s. `tls`: plain TCP when unset;
  // otherwise TLS with a client certificate. Errors: InvalidArgument for a bad endpoint
  // or unusable TLS files (the message names the file).
  [[nodiscard]] static Result<std::unique_ptr<EtcdClient>> Connect(
      const std::string& endpoint,
      std::chrono::milliseconds call_timeout = std::chrono::seconds(5),
      const GrpcTlsOptions& tls = {});

  virtual const std::string& endpoint() const = 0;

  // Sets key = value; with `lease` != 0 the key is deleted when that lease ends.
  // Returns the revision of the write.
  [[nodiscard]] virtual Result<int64_t> Put(std::string_view key, std::string_view value,
                                            int64_t lease = 0) = 0;
  // An election step, in one transaction: when `key` does not exist and `guard` was last
  // written at `guard_mod_revision` (0: `guard` does not exist), creates key = value
  // under `lease` and writes guard = value. Returns the revision of that write (the
  // winner's term), or 0 when the conditions did not hold and nothing was written.
  [[nodiscard]] virtual Result<int64_t> CreateGuarded(std::string_view key, std::string_view guard,
                                                      int64_t guard_mod_revision, std::string_view value,
                                                      int64_t lease) = 0;
  // Every key starting with `prefix`, at one revision.
  [[nodiscard]] virtual Result<Listing> GetPrefix(std::string_view prefix) = 0;
  // Deletes `key`; returns how many keys went (0 or 1).
  [[nodiscard]] virtual Result<int64_t> Delete(std::string_view key) = 0;

  // A new lease of `ttl_seconds` (etcd may round it up to its minimum).
  [[nodiscard]] virtual Result<Lease> GrantLease(int64_t ttl_seconds) = 0;
  // Renews the lease once; returns its renewed TTL, or 0 when the lease no longer
  // exists (expired or revoked: its keys are gone).
  [[nodiscard]] virtual Result<int64_t> KeepAliveOnce(int64_t lease_id) = 0;
  // Ends the lease now, deleting its keys. kNotFound when it no longer exists.
  [[nodiscard]] virtual Status RevokeLease(int64_t lease_id) = 0;
  // Compacts history up to `revision` (tests and operators; watches older than it are
  // cancelled with the compaction revision).
  [[nodiscard]] virtual Status Compact(int64_t revision) = 0;

  // Watches every key under `prefix` from `start_revision` (> 0) and calls `on_events`
  // for each batch, in revision order, until `on_events` returns false, the stream
  // breaks or `Cancel` of `handle` is called. Blocking; returns:
  //  - kOk after a cancel or when on_events returned false;
  //  - kOutOfRange when start_revision was compacted away (message says the compact
  //    revision; *compact_revision is set): re-list and watch again;
  //  - kUnavailable (or another error) when the stream broke: resume from the last
  //    revision seen + 1.
  class WatchHandle {
   public:
    virtual ~WatchHandle() = default;
    // Ends a running Watch (from any thread); a later Watch with this handle ends at once.
    virtual void Cancel() = 0;
  };
  [[nodiscard]] virtual std::unique_ptr<WatchHandle> NewWatchHandle() = 0;
  // `header_revision`: the store revision the batch was sent at (>= its events').
  using EventsFn =
      std::function<bool(const std::vector<WatchEvent>& events, int64_t header_revision)>;
  [[nodiscard]] virtual Status Watch(std::string_view prefix, int64_t start_revision,
                                     WatchHandle* handle, const EventsFn& on_events,
                                     int64_t* compact_revision) = 0;
};

}  // namespace sinew::coord
