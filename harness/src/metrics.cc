#include "metrics.h"

#include <sstream>

namespace sinew::harness {

void Metrics::Add(const std::string& name, const std::string& labels, double delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_[name][labels] += delta;
}

void Metrics::Observe(const std::string& name, const std::string& labels, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  Histogram& h = histograms_[name][labels];
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++h.counts[i];
  }
  ++h.count;
  h.sum += seconds;
}

std::string Metrics::Render(const std::string& extra) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  auto braces = [](const std::string& labels, const std::string& more) {
    std::string all = labels;
    if (!more.empty()) all += (all.empty() ? "" : ",") + more;
    return all.empty() ? std::string() : "{" + all + "}";
  };
  for (const auto& [name, series] : counters_) {
    out << "# TYPE " << name << " counter\n";
    for (const auto& [labels, value] : series) out << name << braces(labels, "") << " " << value << "\n";
  }
  for (const auto& [name, series] : histograms_) {
    out << "# TYPE " << name << " histogram\n";
    for (const auto& [labels, h] : series) {
      for (size_t i = 0; i < kBuckets.size(); ++i) {
        std::ostringstream le;
        le << "le=\"" << kBuckets[i] << "\"";
        out << name << "_bucket" << braces(labels, le.str()) << " " << h.counts[i] << "\n";
      }
      out << name << "_bucket" << braces(labels, "le=\"+Inf\"") << " " << h.count << "\n";
      out << name << "_sum" << braces(labels, "") << " " << h.sum << "\n";
      out << name << "_count" << braces(labels, "") << " " << h.count << "\n";
    }
  }
  out << extra;
  return out.str();
}

}  // namespace sinew::harness
