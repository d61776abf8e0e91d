// The device sampler's selection (src/engine/sample_select.h) run on the host
// with the CUDA kernel's loop and reduction tree, against ChooseToken, the host
// definition the CPU backend and the Sampler use. Greedy picks must be equal
// always; sampled picks may differ only where the draw falls within rounding
// of a boundary (the sums are in another order), which these cases never hit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sample_select.h"
#include "sinew/model/sampling.h"

namespace sinew::model {
namespace {

struct Case {
  std::vector<float> logits;
  std::vector<uint32_t> mask;  // empty: all allowed
  RowSampling row;
};

SampledToken Reference(const Case& c) {
  std::vector<float> x = c.logits;
  bool any = c.mask.empty();
  for (size_t i = 0; i < x.size() && !c.mask.empty(); ++i) {
    if ((c.mask[i / 32] >> (i % 32) & 1u) == 0) {
      x[i] = -INFINITY;
    } else {
      any = true;
    }
  }
  if (!any) return SampledToken{};
  std::vector<std::pair<float, int32_t>> scratch;
  const int32_t id = ChooseToken(x, c.row, scratch);
  return SampledToken{id, x[static_cast<size_t>(id)] - LogSumExp(x)};
}

SampledToken Selected(const Case& c) {
  select::HostBlock block;
  return select::SelectToken(block, c.logits.data(), static_cast<int32_t>(c.logits.size()),
                             c.mask.empty() ? nullptr : c.mask.data(), c.row);
}

Case RandomCase(std::mt19937& rng, int32_t n) {
  Case c;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = std::uniform_real_distribution<float>(0.5f, 8.0f)(rng);
  const bool ties = rng() % 4 == 0;  // logits on a coarse grid: many equal values
  for (int32_t i = 0; i < n; ++i) {
    float v = normal(rng) * scale;
    if (ties) v = std::round(v);
    c.logits.push_back(v);
  }
  switch (rng() % 5) {
    case 0: {  // about half allowed
      c.mask.assign(static_cast<size_t>(MaskWords(n)), 0);
      for (int32_t i = 0; i < n; ++i) {
        if (rng() % 2 == 0) c.mask[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
      }
      break;
    }
    case 1: {  // a few allowed, as a grammar at a structural point
      c.mask.assign(static_cast<size_t>(MaskWords(n)), 0);
      for (int k = 0; k < 3; ++k) {
        const int32_t i = static_cast<int32_t>(rng() % static_cast<uint32_t>(n));
        c.mask[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
      }
      break;
    }
    default:
      break;
  }
  RowSampling& r = c.row;
  r.greedy = rng() % 4 == 0;
  r.temperature = std::uniform_real_distribution<float>(0.1f, 2.0f)(rng);
  const int32_t ks[] = {0, 0, 1, 5, 40, n - 1, n + 3};
  r.top_k = ks[rng() % 7];
  const float ps[] = {1.0f, 1.0f, 0.95f, 0.9f, 0.5f, 0.05f};
  r.top_p = ps[rng() % 6];
  const float mins[] = {0.0f, 0.0f, 0.05f, 0.3f, 1.0f};
  r.min_p = mins[rng() % 5];
  r.u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return c;
}

TEST(SampleSelect, PicksChooseTokensTokenOnRandomRows) {
  std::mt19937 rng(20261203);
  int sampled = 0, greedy = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int32_t sizes[] = {1, 2, 31, 33, 100, 1000, 4099, 32000};
    const int32_t n = sizes[iter % 8];
    const Case c = RandomCase(rng, n);
    const SampledToken want = Reference(c);
    const SampledToken got = Selected(c);
    ASSERT_EQ(got.id, want.id) << "case " << iter << " n " << n << " greedy " << c.row.greedy
                               << " t " << c.row.temperature << " k " << c.row.top_k << " p "
                               << c.row.top_p << " min_p " << c.row.min_p << " u " << c.row.u
                               << " masked " << !c.mask.empty();
    if (want.id >= 0) {
      EXPECT_NEAR(got.logprob, want.logprob, 1e-4f * (1.0f + std::fabs(want.logprob)));
    }
    (c.row.greedy ? greedy : sampled) += 1;
  }
  EXPECT_GT(sampled, 300);
  EXPECT_GT(greedy, 100);
}

TEST(SampleSelect, EdgesOfTheDraw) {
  // u at 0 takes the first token of the order; u just below 1 the last kept one.
  Case c;
  c.logits = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  c.row.greedy = false;
  c.row.temperature = 1.0f;
  c.row.u = 0.0;
  EXPECT_EQ(Selected(c).id, 1);  // the largest logit, the lower id of the tie
  EXPECT_EQ(Reference(c).id, 1);
  c.row.u = std::nextafter(1.0, 0.0);
  EXPECT_EQ(Selected(c).id, Reference(c).id);
  EXPECT_EQ(Selected(c).id, 3);  // the smallest logit comes last
  c.row.top_k = 2;               // only the tie is left
  EXPECT_EQ(Selected(c).id, 2);
  EXPECT_EQ(Reference(c).id, 2);
  c.row.top_k = 0;
  c.row.min_p = 1.0f;  // only tokens as likely as the first
  EXPECT_EQ(Selected(c).id, 2);
  // Signed zeros are one value: the lower id first.
  c.logits = {0.0f, -0.0f};
  c.row = RowSampling{};
  EXPECT_EQ(Selected(c).id, 0);
  c.logits = {-0.0f, 0.0f};
  EXPECT_EQ(Selected(c).id, 0);
  // A mask allowing nothing gives no token.
  c.mask = {0u};
  EXPECT_EQ(Selected(c).id, -1);
  EXPECT_EQ(Reference(c).id, -1);
}

}  // namespace
}  // namespace sinew::model
