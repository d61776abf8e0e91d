// The CUDA backend's element access to every tensor type (cuda/common.cuh),
// run on the host: no GPU needed, so this runs wherever the build has CUDA.
// Each value must equal the reference dequantization (quant/quants.h) up to
// float rounding of the same formula (relative 1e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/common.cuh"
#include "sinew/model/gguf_writer.h"

namespace sinew::model {
namespace {

TEST(CudaLoadElemOnHost, EveryTypeMatchesTheReferenceDequantization) {
  const int64_t n = 1024;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = dist(rng);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::string data = EncodeTensorData(type, values.data(), n);
    std::vector<float> want(static_cast<size_t>(n));
    quant::DequantizeRow(static_cast<uint32_t>(type), data.data(), want.data(), n);
    const auto* row = reinterpret_cast<const uint8_t*>(data.data());
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float got = cuda::LoadElem(type, row, i);
      const float w = want[static_cast<size_t>(i)];
      if (std::fabs(got - w) > 1e-6f * std::max(1.0f, std::fabs(w)) && ++bad <= 5) {
        ADD_FAILURE() << GgmlTypeName(type) << " element " << i << ": " << got << " vs " << w;
      }
    }
    EXPECT_EQ(bad, 0) << GgmlTypeName(type);
  }
}

// The mat-vec kernel's unit dot products, summed over a row, equal the dot
// product of the dequantized row with x (relative 1e-5: summation order differs).
TEST(CudaLoadElemOnHost, MatVecUnitsSumToTheRowDotProduct) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t n : {512, 96, 7}) {
    std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    for (float& v : w) v = dist(rng);
    for (float& v : x) v = dist(rng);
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                          GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      if (n % GgmlBlockSize(type) != 0) continue;
      const int64_t unit = cuda::MatVecUnit(type);
      if (n % unit != 0) continue;  // the kernel then goes element by element
      const std::string data = EncodeTensorData(type, w.data(), n);
      std::vector<float> deq(static_cast<size_t>(n));
      quant::DequantizeRow(static_cast<uint32_t>(type), data.data(), deq.data(), n);
      double want = 0, scale = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(deq[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
        scale += std::fabs(static_cast<double>(deq[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)]);
      }
      double got = 0;
      const auto* row = reinterpret_cast<const uint8_t*>(data.data());
      for (int64_t u = 0; u < n / unit; ++u) got += cuda::DotUnit(type, row, u, x.data());
      EXPECT_NEAR(got, want, 1e-5 * scale) << GgmlTypeName(type) << " n=" << n;
    }
  }
}

TEST(CudaLoadElemOnHost, KvRowIndexFollowsTheBlockTable) {
  const int32_t table[] = {5, 2, 7};
  EXPECT_EQ(cuda::KvRowIndex(table, 16, 0), 80);
  EXPECT_EQ(cuda::KvRowIndex(table, 16, 15), 95);
  EXPECT_EQ(cuda::KvRowIndex(table, 16, 16), 32);
  EXPECT_EQ(cuda::KvRowIndex(table, 16, 40), 7 * 16 + 8);
}

TEST(CudaLoadElemOnHost, KvRowsFindEachRowsOwnTable) {
  // Two sequences: rows 0-1 use table {5, 2}, row 2 uses table {7}.
  const int32_t tables[] = {5, 2, 7};
  const int32_t start[] = {0, 0, 2};
  const int32_t positions[] = {3, 17, 9};
  cuda::KvRows rows;
  rows.tables = tables;
  rows.table_start = start;
  rows.positions = positions;
  rows.block_size = 16;
  EXPECT_EQ(rows.CacheRow(0), 5 * 16 + 3);
  EXPECT_EQ(rows.CacheRow(1), 2 * 16 + 1);
  EXPECT_EQ(rows.CacheRow(2), 7 * 16 + 9);
  EXPECT_EQ(rows.CacheRow(1, 4), 5 * 16 + 4);  // an earlier key of row 1's sequence
}

}  // namespace
}  // namespace sinew::model
