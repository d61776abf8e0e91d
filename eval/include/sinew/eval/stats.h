// Statistics of evaluation results (docs/eval.md). Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace sinew::eval {

struct Interval {
  double low = 0;
  double high = 0;
};

// The Wilson score interval of `successes` out of `n` at 95% (z = 1.959964).
// n = 0 gives [0, 1].
Interval Wilson95(uint64_t successes, uint64_t n);

// The unbiased pass@k estimator of one task (Chen et al. 2021): 1 - C(n-c, k) / C(n, k),
// the chance that at least one of k trials drawn without replacement from the n passes.
// REQUIRES: c <= n, 1 <= k <= n.
double PassAtK(uint64_t n, uint64_t c, uint64_t k);

// The exact (binomial) two-sided McNemar test over paired outcomes: `b` pairs where only
// A passed, `c` pairs where only B passed. Returns the p-value (1 when b + c = 0).
double McNemarExactP(uint64_t b, uint64_t c);

// Paired comparison of B against A over the same n pairs.
struct PairedComparison {
  uint64_t pairs = 0;
  uint64_t only_a = 0;    // A passed, B did not (b)
  uint64_t only_b = 0;    // B passed, A did not (c)
  double difference = 0;  // pass rate of B minus that of A over the pairs
  Interval interval_95;   // of the difference (Wald interval of a paired difference)
  double p_value = 1;     // exact McNemar
};
// `pairs`: (A passed, B passed) for each task × trial both configurations ran.
PairedComparison ComparePaired(const std::vector<std::pair<bool, bool>>& pairs);

// A paired bootstrap of the difference in pass rate, B minus A: `resamples` draws of
// pairs.size() pairs with replacement. The interval is the 2.5th..97.5th percentile of the
// resampled differences (Quantile below); the two-sided p-value is
// min(1, 2 * min(share of differences <= 0, share >= 0)) (0 means below 1/resamples).
// Reproducible: the draws come from std::mt19937_64 seeded with `seed` (its output is
// fixed by the standard) mapped to indices by rejection, not from a library's
// distribution, so the same pairs and seed give the same result everywhere.
// No pairs: interval [-1, 1], p 1.
inline constexpr uint64_t kBootstrapSeed = 20261130;
inline constexpr uint32_t kBootstrapResamples = 10000;
struct BootstrapResult {
  Interval interval_95;
  double p_value = 1;
  uint32_t resamples = 0;
  uint64_t seed = 0;
};
BootstrapResult PairedBootstrap(const std::vector<std::pair<bool, bool>>& pairs,
                                uint32_t resamples = kBootstrapResamples,
                                uint64_t seed = kBootstrapSeed);

// The q-quantile (0..1) with linear interpolation between order statistics (the
// "linear" method of numpy). Empty input gives 0.
double Quantile(std::vector<double> values, double q);
double Mean(const std::vector<double>& values);

}  // namespace sinew::eval
