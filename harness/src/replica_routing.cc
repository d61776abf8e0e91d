#include "replica_routing.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace sinew::harness {
namespace {

ReplicaRouter::Options RouterOptions(const ModelEndpointConfig& config) {
  ReplicaRouter::Options options;
  options.load_factor = config.replica_load_factor;
  options.min_in_flight = config.replica_min_in_flight;
  options.round_robin = config.replica_policy == "round_robin";
  return options;
}

// "scheme://host:port" of a URL.
std::string OriginOf(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

}  // namespace

ReplicaRouting::ReplicaRouting(const ModelEndpointConfig& config)
    : config_(config), router_(config.replicas, RouterOptions(config)) {
  if (config_.replica_health_check_ms > 0) prober_ = std::thread([this] { HealthCheckLoop(); });
}

ReplicaRouting::~ReplicaRouting() {
  stop_probing_ = true;
  probe_cv_.notify_all();
  if (prober_.joinable()) prober_.join();
}

Task<Result<HttpResponse>> ReplicaRouting::Route(const std::string& session_id, const Attempt& attempt) {
  ReplicaRouter::Call routed = router_.Pick(session_id);
  if (routed.choice() != ReplicaRouter::Choice::kHome) {
    spdlog::debug("session {}: model call to {} ({})", session_id, routed.url(),
                  routed.choice() == ReplicaRouter::Choice::kOverloaded ? "its home replica is at the load bound"
                  : routed.choice() == ReplicaRouter::Choice::kDown     ? "its home replica is down"
                                                                        : "every replica is down; probing");
  }
  auto response = co_await attempt(routed.url());
  if (response.ok() ? (response->status >= 500 || response->status == 429)
                    : response.status().code() != StatusCode::kCancelled) {
    routed.Failed();
  } else if (response.ok()) {
    routed.Succeeded();
  }
  co_return response;
}

void ReplicaRouting::HealthCheckLoop() {
  const auto every = std::chrono::milliseconds(config_.replica_health_check_ms);
  std::vector<bool> passing(config_.replicas.size(), true);
  while (!stop_probing_) {
    for (size_t i = 0; i < config_.replicas.size() && !stop_probing_; ++i) {
      HttpRequest req;
      req.url = OriginOf(config_.replicas[i]) + config_.replica_health_path;
      req.timeout_ms = static_cast<uint32_t>(std::min<int64_t>(2000, every.count()));
      req.connect_timeout_ms = req.timeout_ms;
      req.max_response_bytes = 4096;
      req.stop = &stop_probing_;
      req.tls.ca_file = config_.ca_file;
      auto r = http::Fetch(req);
      if (stop_probing_) break;
      const bool ok = r.ok() && r->status >= 200 && r->status < 500 && r->status != 429;
      router_.HealthChecked(i, ok);
      if (ok != passing[i]) {
        passing[i] = ok;
        if (ok) {
          spdlog::info("model replica {} passes its health check again", config_.replicas[i]);
        } else {
          spdlog::warn("model replica {} fails its health check ({}): calls skip it", config_.replicas[i],
                       r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message());
        }
      }
    }
    std::unique_lock<std::mutex> lock(probe_mu_);
    probe_cv_.wait_for(lock, every, [&] { return stop_probing_.load(); });
  }
}

}  // namespace sinew::harness
