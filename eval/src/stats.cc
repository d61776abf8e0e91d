#include "sinew/eval/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sinew::eval {

namespace {
constexpr double kZ95 = 1.959963984540054;

// log C(n, k)
double LogChoose(uint64_t n, uint64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}
}  // namespace

Interval Wilson95(uint64_t successes, uint64_t n) {
  if (n == 0) return {0, 1};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(successes) / nn;
  const double z2 = kZ95 * kZ95;
  const double denom = 1 + z2 / nn;
  const double center = (p + z2 / (2 * nn)) / denom;
  const double half = kZ95 / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

double PassAtK(uint64_t n, uint64_t c, uint64_t k) {
  if (n - c < k) return 1.0;
  // 1 - prod_{i = n-c+1}^{n} (1 - k / i), numerically stable.
  double prod = 1.0;
  for (uint64_t i = n - c + 1; i <= n; ++i) {
    prod *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  }
  return 1.0 - prod;
}

double McNemarExactP(uint64_t b, uint64_t c) {
  const uint64_t n = b + c;
  if (n == 0) return 1.0;
  const uint64_t m = std::min(b, c);
  double tail = 0;
  for (uint64_t i = 0; i <= m; ++i) {
    tail += std::exp(LogChoose(n, i) - static_cast<double>(n) * std::log(2.0));
  }
  return std::min(1.0, 2 * tail);
}

PairedComparison ComparePaired(const std::vector<std::pair<bool, bool>>& pairs) {
  PairedComparison r;
  r.pairs = pairs.size();
  for (const auto& [a, b] : pairs) {
    if (a && !b) ++r.only_a;
    if (b && !a) ++r.only_b;
  }
  if (r.pairs == 0) {
    r.interval_95 = {-1, 1};
    return r;
  }
  const double n = static_cast<double>(r.pairs);
  const double b = static_cast<double>(r.only_a), c = static_cast<double>(r.only_b);
  r.difference = (c - b) / n;
  const double var = std::max(0.0, (b + c) - (c - b) * (c - b) / n);
  const double se = std::sqrt(var) / n;
  r.interval_95 = {std::max(-1.0, r.difference - kZ95 * se),
                   std::min(1.0, r.difference + kZ95 * se)};
  r.p_value = McNemarExactP(r.only_a, r.only_b);
  return r;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace sinew::eval
