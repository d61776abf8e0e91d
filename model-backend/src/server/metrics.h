// Metrics: the server's counters and latency histograms, rendered in the Prometheus text
// exposition format for GET /metrics.
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <functional>

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

  std::string Render() const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                                      0.5,   1.0,  2.5,   5.0,  10.0, 30.0};
  static void RenderServing(const ServingStats& stats, std::string& out);

  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};
    uint64_t count = 0;
    double sum = 0;
    void Observe(double value);
    void Render(const std::string& name, const std::string& labels, std::string& out) const;
  };

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // GUARDED_BY(mutex_)
  std::map<std::string, Histogram> request_seconds_;          // GUARDED_BY(mutex_)
  Histogram first_token_seconds_;                             // GUARDED_BY(mutex_)
  uint64_t prompt_tokens_ = 0;                                // GUARDED_BY(mutex_)
  uint64_t generated_tokens_ = 0;                             // GUARDED_BY(mutex_)
  double generation_seconds_ = 0;                             // GUARDED_BY(mutex_)
  int64_t queue_depth_ = 0;                                   // GUARDED_BY(mutex_)
  std::function<ServingStats()> serving_stats_;               // set before serving
  std::string device_, backend_;                              // set before serving
};

}  // namespace sinew::model
