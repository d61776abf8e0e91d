// Process metrics in the Prometheus text format: counters with labels and latency
// histograms. Session counts by status are read from the store at scrape time.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace sinew::harness {

class Metrics {
 public:
  // Adds `delta` to counter `name` with labels `labels` (already formatted: a="x",b="y").
  void Add(const std::string& name, const std::string& labels, double delta = 1);
  // Records one observation (seconds) in histogram `name`.
  void Observe(const std::string& name, const std::string& labels, double seconds);
  // Renders everything, plus `extra` lines (already in the text format) at the end.
  std::string Render(const std::string& extra) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                      0.25,  0.5,   1,    2.5,   10,   60};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, double>> counters_;        // guarded by mutex_
  std::map<std::string, std::map<std::string, Histogram>> histograms_;  // guarded by mutex_
};

}  // namespace sinew::harness
