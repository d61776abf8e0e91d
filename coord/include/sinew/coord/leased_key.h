// LeasedKey: one key kept in etcd under a lease for as long as this object lives — the
// way a process announces itself (docs/scale-out.md). A thread renews the lease every
// third of its TTL and writes the value whenever it changes; when etcd lost the lease
// (it expired while etcd or this process was unreachable, or etcd's data was wiped) it
// grants a new one and writes the key again. Destruction revokes the lease, so the key
// goes at once on a clean stop; after a crash it goes when the TTL runs out.
//
// Thread-safety: Set and the accessors may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "sinew/coord/etcd_client.h"
#include "sinew/status.h"

namespace sinew::coord {

class LeasedKey {
 public:
  struct Options {
    // Lease TTL in seconds: how long the key outlives a crash. Default: 5
    int64_t ttl_seconds = 5;
    // Pause between attempts while etcd does not answer. Default: 500 ms
    std::chrono::milliseconds retry = std::chrono::milliseconds(500);
  };

  // Grants a lease and writes key = value under it, then keeps both alive. Fails (and
  // leaves nothing behind) when etcd does not answer. `etcd` is not owned and must
  // outlive this.
  [[nodiscard]] static Result<std::unique_ptr<LeasedKey>> Create(EtcdClient* etcd, std::string key,
                                                                 std::string value,
                                                                 Options options);
  virtual ~LeasedKey() = default;

  // The next write (at once, on the keeper thread) stores `value`; equal values are not
  // written again.
  virtual void Set(std::string value) = 0;
  // The current lease id (changes when the lease had to be granted again).
  virtual int64_t lease_id() const = 0;
  // How many times a new lease was granted after the first (etcd lost the old one).
  virtual uint64_t regrants() const = 0;
};

}  // namespace sinew::coord
