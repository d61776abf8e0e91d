// StoreMetricsServer: GET /metrics of a sinew-store (--metrics-listen; docs/session-store.md,
// "Metrics"), in the project's one metrics format (sinew/metrics.h) on its one HTTP
// server. Each scrape reads the store's role, the shard's term, the last sequence number
// and each follower's synced one as they are then; the counters (writes, sync waits,
// failovers seen) accumulate from the process's start. For a member of a replicated
// shard, a thread watches the shard's primary key in etcd (every 500 ms) to know the
// term and to count the failovers this process has seen.
//
// Thread-safety: Render may be called from any thread; the server calls it per scrape.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "sinew/coord/etcd_client.h"
#include "sinew/http/server.h"
#include "sinew/metrics.h"
#include "sinew/session_store/replication.h"

namespace sinew::store {

// What a scrape reads, as the process runs.
struct StoreMetricsSource {
  std::string db;           // its directory (<db>/TERM: the term its log is complete for)
  std::string shard_id;     // "" when not in a shard map
  std::string member;       // the address it advertises; "" when not a member of a replicated shard
  std::string replication;  // "sync", "async", or "" (not replicated)
  bool follower = false;    // started with --follow
  // The Primary of the moment; null (or empty) while this process does not lead.
  std::function<std::shared_ptr<Primary>()> primary;
  // A --follow follower's last synced sequence number (empty otherwise).
  std::function<uint64_t()> follower_applied;
  // With a member: its etcd client (outlives the server), watched for the shard's term.
  coord::EtcdClient* etcd = nullptr;
};

class StoreMetricsServer {
 public:
  // Serves GET /metrics at `options` (host, port, TLS). `counters` (filled by
  // MeteredStore) must outlive the server. Errors: http::Server::Start's.
  [[nodiscard]] static Result<std::unique_ptr<StoreMetricsServer>> Start(
      const http::ServerOptions& options, Metrics* counters, StoreMetricsSource source);
  ~StoreMetricsServer();  // stops the watch and the server

  // "host:port" as bound.
  std::string address() const { return server_->address(); }
  // The text a scrape gets.
  std::string Render();

 private:
  StoreMetricsServer(Metrics* counters, StoreMetricsSource source);
  void WatchTerm();  // the etcd thread

  Metrics* counters_;
  const StoreMetricsSource source_;
  std::mutex mu_;
  int64_t term_ = 0;  // guarded by mu_; the shard primary key's creation revision, 0: none
  std::string primary_address_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread watcher_;
  std::unique_ptr<http::Server> server_;
};

}  // namespace sinew::store
