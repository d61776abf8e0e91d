#include "sinew/metrics.h"

#include <cmath>
#include <cstdio>

namespace sinew {
namespace {

std::string Number(double value) {
  char buffer[64];
  if (std::abs(value) < 9007199254740992.0 && value == std::floor(value)) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  }
  return buffer;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// `{labels,more}`, `{labels}`, `{more}` or nothing.
std::string Braces(const std::string& labels, const std::string& more) {
  std::string all = labels;
  if (!more.empty()) all += (all.empty() ? "" : ",") + more;
  return all.empty() ? std::string() : "{" + all + "}";
}

}  // namespace

Metrics::Metrics(std::vector<double> buckets) : buckets_(std::move(buckets)) {}

Metrics::Family& Metrics::FamilyFor(const std::string& name, MetricType type) {
  auto [it, inserted] = family_index_.emplace(name, families_.size());
  if (inserted) {
    families_.push_back(Family{name, type, "", {}, {}});
  }
  return families_[it->second];
}

void Metrics::Describe(const std::string& name, MetricType type, const std::string& help) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool known = family_index_.count(name) > 0;
  Family& family = FamilyFor(name, type);
  if (!known) family.help = help;
}

void Metrics::Add(const std::string& name, const std::string& labels, double delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  FamilyFor(name, MetricType::kCounter).values[labels] += delta;
}

void Metrics::Set(const std::string& name, const std::string& labels, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  FamilyFor(name, MetricType::kGauge).values[labels] = value;
}

void Metrics::Observe(const std::string& name, const std::string& labels, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  Histogram& h = FamilyFor(name, MetricType::kHistogram).histograms[labels];
  if (h.counts.empty()) h.counts.resize(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (value <= buckets_[i]) ++h.counts[i];
  }
  ++h.count;
  h.sum += value;
}

std::string Metrics::Render(const std::string& extra) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const Family& family : families_) {
    if (family.values.empty() && family.histograms.empty()) continue;
    if (!family.help.empty()) out += "# HELP " + family.name + " " + family.help + "\n";
    out += "# TYPE " + family.name + " " + TypeName(family.type) + "\n";
    for (const auto& [labels, value] : family.values) {
      out += family.name + Braces(labels, "") + " " + Number(value) + "\n";
    }
    for (const auto& [labels, h] : family.histograms) {
      for (size_t i = 0; i < buckets_.size(); ++i) {
        out += family.name + "_bucket" + Braces(labels, "le=\"" + Number(buckets_[i]) + "\"") + " " +
               std::to_string(h.counts[i]) + "\n";
      }
      out += family.name + "_bucket" + Braces(labels, "le=\"+Inf\"") + " " + std::to_string(h.count) + "\n";
      out += family.name + "_sum" + Braces(labels, "") + " " + Number(h.sum) + "\n";
      out += family.name + "_count" + Braces(labels, "") + " " + std::to_string(h.count) + "\n";
    }
  }
  out += extra;
  return out;
}

}  // namespace sinew
