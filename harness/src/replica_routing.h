// ReplicaRouting: where the attempts of an HTTP model client go when its model has
// replicas (ModelEndpointConfig::replicas), whatever its wire protocol: each attempt to
// the replica ReplicaRouter picks for the call's session (so a retry after a failure moves
// on), the attempt's outcome told back to the router, and every replica's health checked
// on a thread of its own (docs/scale-out.md, "Model replicas").
//
// Thread-safety: Route and MetricsText may be called from many threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "async.h"
#include "outgoing_http.h"
#include "replica_router.h"
#include "sinew/harness/config.h"

namespace sinew::harness {

class ReplicaRouting {
 public:
  // One attempt against the server at `base_url` (a replica's URL).
  using Attempt = std::function<Task<Result<HttpResponse>>(const std::string& base_url)>;

  // `config.replicas` must be non-empty. Starts the health checks when
  // config.replica_health_check_ms is not 0.
  explicit ReplicaRouting(const ModelEndpointConfig& config);
  // Stops the health checks (an outstanding check is stopped at once).
  ~ReplicaRouting();

  // Runs `attempt` on the replica picked for session `session_id`. A transport error
  // (but a cancellation), an HTTP 5xx or 429 takes the replica down for a while; any
  // other answer keeps it up. The caller co_awaits it at once.
  Task<Result<HttpResponse>> Route(const std::string& session_id, const Attempt& attempt);

  // ReplicaRouter::MetricsText.
  std::string MetricsText(std::string_view model) const { return router_.MetricsText(model); }

 private:
  // Checks every replica's health each replica_health_check_ms until stopped, and tells
  // the router. Logs when a replica starts failing its check and when it passes again.
  void HealthCheckLoop();

  const ModelEndpointConfig config_;
  ReplicaRouter router_;
  std::atomic<bool> stop_probing_{false};
  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::thread prober_;  // the health checks, with replica_health_check_ms
};

}  // namespace sinew::harness
