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

// The q-quantile (0..1) with linear interpolation between order statistics (the
// "linear" method of numpy). Empty input gives 0.
double Quantile(std::vector<double> values, double q);
double Mean(const std::vector<double>& values);

}  // namespace sinew::eval
