// Metrics: the server's counters and latency histograms, rendered in the Prometheus text
// exposition format for GET /metrics.
//
// Thread-safety: every method may be called from any thread; SetServingStats and
// SetDevice before serving.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sinew/metrics.h"
#include "sinew/model/serving.h"

namespace sinew::model {

class Metrics {
 public:
  // One finished HTTP or gRPC request. `endpoint` is e.g. "/v1/completions" or "grpc_generate".
  void RecordRequest(const std::string& endpoint, int status, double seconds);
  // One finished generation.
  void RecordGeneration(int64_t prompt_tokens, int64_t generated_tokens,
                        double time_to_first_token_s, double generation_s);
  void SetQueueDepth(int64_t depth);
  // Where Render() reads the serving engine's counters (prefix cache hits and
  // misses, preemptions, KV blocks, batch). Set once, before serving.
  void SetServingStats(std::function<ServingStats()> source);
  // The device and backend the model runs on, rendered as the info gauge
  // sinew_model_device_info{device="cuda:0",backend="cuda-sm90"} 1. Set once, before serving.
  void SetDevice(std::string device, std::string backend);

  Metrics();
  // Reads the serving engine's counters, then renders everything.
  std::string Render();

 private:
  sinew::Metrics metrics_;
  std::function<ServingStats()> serving_stats_;  // set before serving
};

}  // namespace sinew::model
