// PrefixMirror: a local copy of every key under an etcd prefix, kept current by a
// watch. It lists the prefix, then watches from the listing's revision + 1. When the
// stream breaks (etcd restarted, network) it reconnects and resumes from the last
// revision it saw + 1, so no change is missed; when that revision was compacted away
// it lists again. While etcd is unreachable the copy keeps its last known contents.
//
// Thread-safety: all methods may be called from any thread; `on_change` runs on the
// watch thread, one call at a time, and must not call back into this object's Stop.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "sinew/coord/etcd_client.h"

namespace sinew::coord {

class PrefixMirror {
 public:
  struct Options {
    // Pause before reconnecting after a failure (doubles up to 2 s). Default: 100 ms
    std::chrono::milliseconds retry = std::chrono::milliseconds(100);
  };
  // Called after each change with the full new contents (key -> value).
  using ChangeFn = std::function<void(const std::map<std::string, KeyValue>& contents)>;

  // Starts the watch thread. `etcd` is not owned and must outlive this. Returns at once;
  // `WaitSynced` waits for the first listing.
  static std::unique_ptr<PrefixMirror> Start(EtcdClient* etcd, std::string prefix,
                                             ChangeFn on_change, Options options);
  static std::unique_ptr<PrefixMirror> Start(EtcdClient* etcd, std::string prefix,
                                             ChangeFn on_change = nullptr) {
    return Start(etcd, std::move(prefix), std::move(on_change), Options());
  }
  virtual ~PrefixMirror() = default;  // stops the watch thread

  // The current contents, key -> value.
  virtual std::map<std::string, KeyValue> Snapshot() const = 0;
  // True once the prefix was listed at least once; waits up to `timeout` for it.
  virtual bool WaitSynced(std::chrono::milliseconds timeout) const = 0;
  // The newest revision applied (0 before the first listing).
  virtual int64_t revision() const = 0;
  // Counters for tests and metrics: stream reconnects (resumes) and full re-listings
  // after compaction.
  virtual uint64_t resumes() const = 0;
  virtual uint64_t relists() const = 0;
};

}  // namespace sinew::coord
