#include "sinew/eval/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

BootstrapResult PairedBootstrap(const std::vector<std::pair<bool, bool>>& pairs,
                                uint32_t resamples, uint64_t seed) {
  BootstrapResult r;
  r.resamples = resamples;
  r.seed = seed;
  if (pairs.empty() || resamples == 0) {
    r.interval_95 = {-1, 1};
    return r;
  }
  std::vector<int> d;  // per pair: B passed minus A passed
  d.reserve(pairs.size());
  for (const auto& [a, b] : pairs) d.push_back(static_cast<int>(b) - static_cast<int>(a));
  const uint64_t n = d.size();
  // Indices in [0, n) without modulo bias: reject draws in the last partial block.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::mt19937_64 gen(seed);
  auto index = [&]() {
    uint64_t x;
    do {
      x = gen();
    } while (x >= limit);
    return x % n;
  };
  std::vector<double> diffs(resamples);
  uint64_t at_or_below = 0, at_or_above = 0;
  for (uint32_t s = 0; s < resamples; ++s) {
    int64_t sum = 0;
    for (uint64_t i = 0; i < n; ++i) sum += d[index()];
    diffs[s] = static_cast<double>(sum) / static_cast<double>(n);
    at_or_below += sum <= 0;
    at_or_above += sum >= 0;
  }
  r.interval_95 = {Quantile(diffs, 0.025), Quantile(diffs, 0.975)};
  r.p_value = std::min(1.0, 2.0 * static_cast<double>(std::min(at_or_below, at_or_above)) /
                                static_cast<double>(resamples));
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
