// Kernel-level contracts of the CPU kernel table (src/engine/cpu/kernels.h) that the ops
// tests cannot see from outside: a fused kernel gives exactly what the simple one it
// replaces gives, and a matrix-product tile gives each element the same bits whatever
// the tile's shape.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/kernels.h"
#include "quant/quants.h"
#include "sinew/model/gguf.h"
#include "sinew/model/gguf_writer.h"

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

// The matrix-product tiles of one SIMD level (the test's parameter), every weight type:
// each (rows_w, rows_x) shape from 1x1 to 4x4 gives every element the bits the 4x4 tile
// gives it (so a matrix product of tiles is batch invariant), and the results agree with
// the scalar table's dot products over the same quantized activations.
class CpuTileTest : public ::testing::TestWithParam<SimdLevel> {};

struct TileCase {
  GgmlType type;
  GemmTileFn KernelTable::*tile;
  VecDotFn KernelTable::*dot;
};

TEST_P(CpuTileTest, EveryTileShapeGivesEachElementTheSameBits) {
  const SimdLevel level = GetParam();
  const char* name =
      level == SimdLevel::kAvx2 ? "AVX2 (with FMA and F16C)" : "AVX-512 (F, BW, VL, VNNI)";
  const bool has = level == SimdLevel::kAvx2 ? CpuHasAvx2() : CpuHasAvx512();
  if (!has) GTEST_SKIP() << "this CPU does not run " << name << " (or SINEW_CPU_LEVEL caps it)";
  const KernelTable t = MakeKernelTable(level);
  const KernelTable scalar = MakeKernelTable(SimdLevel::kScalar);
  const TileCase cases[] = {{GgmlType::kF32, &KernelTable::tile_f32, &KernelTable::dot_f32},
                            {GgmlType::kF16, &KernelTable::tile_f16, &KernelTable::dot_f16},
                            {GgmlType::kBF16, &KernelTable::tile_bf16, &KernelTable::dot_bf16},
                            {GgmlType::kQ8_0, &KernelTable::tile_q8_0, &KernelTable::dot_q8_0},
                            {GgmlType::kQ4_0, &KernelTable::tile_q4_0, &KernelTable::dot_q4_0},
                            {GgmlType::kQ4_K, &KernelTable::tile_q4_k, &KernelTable::dot_q4_k},
                            {GgmlType::kQ6_K, &KernelTable::tile_q6_k, &KernelTable::dot_q6_k}};
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const TileCase& c : cases) {
    const std::string type(GgmlTypeName(c.type));
    const GemmTileFn tile = t.*c.tile;
    ASSERT_NE(tile, nullptr) << t.name << " has no matrix-product tile for " << type;
    const bool is_float =
        c.type == GgmlType::kF32 || c.type == GgmlType::kF16 || c.type == GgmlType::kBF16;
    const bool q8_0_act = c.type == GgmlType::kQ8_0 || c.type == GgmlType::kQ4_0;
    // Row lengths: one block-aligned, one with an unpaired last 32-block, one with a
    // tail no SIMD width divides.
    std::vector<int64_t> ks = {512};
    if (GgmlBlockSize(c.type) <= 32) ks.push_back(96);
    if (is_float) ks.insert(ks.end(), {172, 180});
    for (int64_t n : ks) {
      std::vector<float> wf(static_cast<size_t>(4 * n)), xf(static_cast<size_t>(4 * n));
      for (float& v : wf) v = dist(rng);
      for (float& v : xf) v = dist(rng);
      const std::string w = EncodeTensorData(c.type, wf.data(), 4 * n);
      const int64_t ws = GgmlRowSize(c.type, n);
      // The activations in the tile's format, and in the scalar dot product's.
      int64_t xs = n * 4, ref_xs = n * 4;
      QuantizeActFn quantize = nullptr, ref_quantize = nullptr;
      if (q8_0_act) {
        xs = Q8TileActRowBytes(n), quantize = t.quantize_q8_0_tile;
        ref_xs = GgmlRowSize(GgmlType::kQ8_0, n), ref_quantize = scalar.quantize_q8_0;
      } else if (!is_float) {
        xs = ref_xs = n / quant::kQKK * static_cast<int64_t>(sizeof(quant::BlockQ8_K));
        quantize = t.quantize_q8_k, ref_quantize = scalar.quantize_q8_k;
      }
      std::vector<uint8_t> x(static_cast<size_t>(4 * xs)), ref_x(static_cast<size_t>(4 * ref_xs));
      for (int r = 0; r < 4; ++r) {
        if (quantize == nullptr) {
          std::memcpy(x.data() + r * xs, xf.data() + r * n, static_cast<size_t>(n) * 4);
          std::memcpy(ref_x.data() + r * ref_xs, xf.data() + r * n, static_cast<size_t>(n) * 4);
        } else {
          quantize(xf.data() + r * n, x.data() + r * xs, n);
          ref_quantize(xf.data() + r * n, ref_x.data() + r * ref_xs, n);
        }
      }
      // out[c * 4 + r] for the whole 4x4 tile, then every smaller shape at both corners.
      const int64_t os = 4;
      std::vector<float> full(16);
      tile(n, w.data(), ws, 4, x.data(), xs, 4, full.data(), os);
      for (int rows_w = 1; rows_w <= 4; ++rows_w) {
        for (int rows_x = 1; rows_x <= 4; ++rows_x) {
          for (bool last : {false, true}) {
            const int r0 = last ? 4 - rows_w : 0, c0 = last ? 4 - rows_x : 0;
            std::vector<float> part(16, -1.0f);
            tile(n, w.data() + r0 * ws, ws, rows_w, x.data() + c0 * xs, xs, rows_x,
                 part.data() + c0 * os + r0, os);
            for (int cc = c0; cc < c0 + rows_x; ++cc) {
              for (int r = r0; r < r0 + rows_w; ++r) {
                const size_t at = static_cast<size_t>(cc * os + r);
                ASSERT_EQ(part[at], full[at])
                    << t.name << " " << type << " n=" << n << " tile " << rows_w << "x" << rows_x
                    << " at (" << r0 << ", " << c0 << "): element (" << r << ", " << cc << ")";
              }
            }
          }
        }
      }
      // The scalar dot products over the same quantized activations differ only in the
      // order of float additions.
      double err = 0, norm = 0;
      for (int cc = 0; cc < 4; ++cc) {
        for (int r = 0; r < 4; ++r) {
          const double want = (scalar.*c.dot)(n, w.data() + r * ws, ref_x.data() + cc * ref_xs);
          const double got = full[static_cast<size_t>(cc * os + r)];
          err += (got - want) * (got - want);
          norm += want * want;
        }
      }
      EXPECT_LE(err / norm, 1e-10) << t.name << " " << type << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuTileTest,
                         ::testing::Values(SimdLevel::kAvx2, SimdLevel::kAvx512),
                         [](const ::testing::TestParamInfo<SimdLevel>& p) {
                           return std::string(p.param == SimdLevel::kAvx2 ? "Avx2" : "Avx512");
                         });

}  // namespace
}  // namespace sinew::model::cpu
