// Kernel-level contracts of the CPU kernel table (src/engine/cpu/kernels.h) that the ops
// tests cannot see from outside: a fused kernel gives exactly what the simple one it
// replaces gives.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// AttnValuesFn equals the AxpyFn of its type called value row after value row, bit for
// bit: attention's values are the same whichever path adds them.
TEST(CpuKernelsTest, AttnValuesEqualsAxpyRowAfterRow) {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (CpuHasAvx2()) levels.push_back(SimdLevel::kAvx2);
  if (CpuHasAvx512()) levels.push_back(SimdLevel::kAvx512);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int checked = 0;
  for (SimdLevel level : levels) {
    const KernelTable t = MakeKernelTable(level);
    for (bool f16 : {false, true}) {
      const AttnValuesFn values = f16 ? t.attn_values_f16 : t.attn_values_f32;
      const AxpyFn axpy = f16 ? t.axpy_f16 : t.axpy_f32;
      if (values == nullptr) continue;
      for (int64_t n : {8, 64, 72, 128}) {
        // Runs of 1 to 4 rows, a block's 16 and 33; GQA groups of 3 and 8 heads.
        for (const auto& [rows, heads] :
             {std::pair{1, 3}, {2, 3}, {3, 3}, {4, 3}, {16, 3}, {33, 3}, {5, 8}, {16, 8}, {1, 1}}) {
          const int64_t elem = f16 ? 2 : 4, stride = (n + 5) * elem;
          std::vector<uint8_t> v(static_cast<size_t>(rows * stride));
          for (int j = 0; j < rows; ++j) {
            for (int64_t i = 0; i < n; ++i) {
              const float x = dist(rng);
              uint8_t* at = v.data() + j * stride + i * elem;
              if (f16) {
                const uint16_t h = quant::F32ToF16(x);
                std::memcpy(at, &h, 2);
              } else {
                std::memcpy(at, &x, 4);
              }
            }
          }
          const int64_t p_stride = 41;
          std::vector<float> p(static_cast<size_t>(heads * p_stride));
          for (float& x : p) x = dist(rng);
          std::vector<float> start(static_cast<size_t>(heads * n));
          for (float& x : start) x = dist(rng);
          std::vector<float> fused = start, simple = start;
          values(n, v.data(), stride, rows, p.data(), p_stride, heads, fused.data(), n);
          for (int j = 0; j < rows; ++j) {
            for (int g = 0; g < heads; ++g) {
              axpy(n, p[static_cast<size_t>(g * p_stride + j)], v.data() + j * stride,
                   simple.data() + g * n);
            }
          }
          ASSERT_EQ(0, std::memcmp(fused.data(), simple.data(), fused.size() * sizeof(float)))
              << t.name << (f16 ? " F16" : " F32") << " n=" << n << " rows=" << rows
              << " heads=" << heads;
          ++checked;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no kernel table here has attention-values kernels (AVX-512)";
}

// Every table's SoftmaxFn against the scalar one (std::exp): the same largest score, and
// each numerator and the sum within a few float roundings.
TEST(CpuKernelsTest, SoftmaxMatchesTheScalarOne) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-40.0f, 40.0f);
  const KernelTable scalar = MakeKernelTable(SimdLevel::kScalar);
  std::vector<SimdLevel> levels;
  if (CpuHasAvx2()) levels.push_back(SimdLevel::kAvx2);
  if (CpuHasAvx512()) levels.push_back(SimdLevel::kAvx512);
  if (levels.empty()) GTEST_SKIP() << "no SIMD kernel table on this CPU";
  for (SimdLevel level : levels) {
    const KernelTable t = MakeKernelTable(level);
    for (int64_t n : {1, 5, 16, 17, 100, 1340}) {
      std::vector<float> scores(static_cast<size_t>(n));
      for (float& x : scores) x = dist(rng);
      std::vector<float> ours = scores, want = scores;
      const float sum = t.softmax(ours.data(), n, 0.125f);
      const float want_sum = scalar.softmax(want.data(), n, 0.125f);
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << t.name << " n=" << n;
      for (int64_t j = 0; j < n; ++j) {
        const float w = want[static_cast<size_t>(j)];
        EXPECT_NEAR(ours[static_cast<size_t>(j)], w, 1e-6 * w + 1e-30)
            << t.name << " n=" << n << " j=" << j;
      }
    }
  }
}

}  // namespace
}  // namespace sinew::model::cpu
