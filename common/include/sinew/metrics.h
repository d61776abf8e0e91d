// Metrics: counters, gauges and histograms with labels, rendered in the Prometheus text
// exposition format (version 0.0.4) for GET /metrics.
//
// A metric family is named once, with its type and help text (Describe), or on first use:
// Add makes a counter, Set a gauge, Observe a histogram. Families render in the order
// they were first described or used, each series of a family in the order of its labels;
// a family without series renders nothing.
//
// Thread-safety: every method may be called from many threads at once (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace sinew {

enum class MetricType { kCounter, kGauge, kHistogram };

class Metrics {
 public:
  // `buckets`: the upper bounds of every histogram's buckets, ascending (+Inf is implied).
  explicit Metrics(std::vector<double> buckets);

  // Declares family `name`: its type and its HELP line (none when `help` is empty).
  // Describing a family again changes nothing.
  void Describe(const std::string& name, MetricType type, const std::string& help = "");
  // Adds `delta` to the series `labels` (already formatted: a="x",b="y"; "" for none) of
  // `name`, a counter unless described otherwise.
  void Add(const std::string& name, const std::string& labels, double delta = 1);
  // Sets the series `labels` of `name`, a gauge unless described otherwise, to `value`.
  void Set(const std::string& name, const std::string& labels, double value);
  // Records one observation of `value` in the series `labels` of histogram `name`.
  void Observe(const std::string& name, const std::string& labels, double value);

  // Everything, then `extra` (lines already in the text format). Whole numbers print as
  // integers, others with nine significant digits.
  std::string Render(const std::string& extra = "") const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // one per bucket, cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    std::string name;
    MetricType type = MetricType::kCounter;
    std::string help;
    std::map<std::string, double> values;        // counters and gauges, by labels
    std::map<std::string, Histogram> histograms;  // by labels
  };
  // The family `name`, created with `type` if it does not exist yet. Needs mutex_.
  Family& FamilyFor(const std::string& name, MetricType type);

  const std::vector<double> buckets_;
  mutable std::mutex mutex_;
  std::vector<Family> families_;              // guarded by mutex_; in order of first use
  std::map<std::string, size_t> family_index_;  // guarded by mutex_; name -> families_ index
};

}  // namespace sinew
