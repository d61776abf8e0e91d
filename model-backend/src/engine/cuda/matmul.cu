#include "cuda/matmul.cuh"

namespace sinew::model::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // warps per block, one output row each

// One warp per output row and up to kCols columns (tokens) of x: lane l dots
// units l, l + 32, ... (DotUnit) with each column, so the lanes of a warp read
// neighbouring blocks of the row and every column reuses them from L1. Each
// (row, column) gets the same arithmetic in every instantiation and grid: a
// lane's sum over its units in order, then the warp's fixed tree (WarpSum).
// That makes a token's results the same bits alone or in any batch.
template <GgmlType kType, int kCols>
__global__ void MatMulColsKernel(const uint8_t* w, int64_t row_bytes, int64_t K, int64_t N,
                                 const float* x, int64_t M, float* y) {
  const int64_t n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (n >= N) return;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kCols;
  const int cols = static_cast<int>(M - m0 < kCols ? M - m0 : kCols);
  const int lane = threadIdx.x % kWarp;
  const uint8_t* row = w + n * row_bytes;
  constexpr int64_t kUnit = MatVecUnit(kType);
  float sum[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) sum[c] = 0.0f;
  if (K % kUnit == 0) {
    for (int64_t u = lane; u < K / kUnit; u += kWarp) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        if (c < cols) sum[c] = __fadd_rn(sum[c], DotUnit(kType, row, u, x + (m0 + c) * K));
      }
    }
  } else {  // F16 rows of odd length: element by element
    for (int64_t k = lane; k < K; k += kWarp) {
      const float wk = LoadElem(kType, row, k);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        if (c < cols) sum[c] = __fadd_rn(sum[c], __fmul_rn(wk, x[(m0 + c) * K + k]));
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const float total = WarpSum(sum[c]);
    if (lane == 0 && c < cols) y[(m0 + c) * N + n] = total;
  }
}

template <GgmlType kType>
cudaError_t MatMulCols(const void* w, int64_t row_bytes, int64_t K, int64_t N, const float* x,
                       int64_t M, float* y, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  if (M == 1) {
    MatMulColsKernel<kType, 1><<<dim3(blocks, 1), kRowsPerBlock * kWarp, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, K, N, x, M, y);
  } else if (M <= kMatMulCols) {
    MatMulColsKernel<kType, kMatMulCols><<<dim3(blocks, 1), kRowsPerBlock * kWarp, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, K, N, x, M, y);
  } else {
    // Wide batches: 32 tokens per pass, so the weights are read M / 32 times.
    constexpr int kWide = 4 * kMatMulCols;
    const unsigned groups = static_cast<unsigned>((M + kWide - 1) / kWide);
    MatMulColsKernel<kType, kWide><<<dim3(blocks, groups), kRowsPerBlock * kWarp, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, K, N, x, M, y);
  }
  return cudaGetLastError();
}

__global__ void DequantF16Kernel(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t K,
                                 __half* out) {
  const int64_t r = blockIdx.y;
  const uint8_t* row = w + r * row_bytes;
  for (int64_t k = blockIdx.x * blockDim.x + threadIdx.x; k < K; k += gridDim.x * blockDim.x) {
    out[r * K + k] = __float2half_rn(LoadElem(type, row, k));
  }
}

__global__ void F32ToF16Kernel(const float* x, __half* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

}  // namespace

cudaError_t LaunchMatMulCols(GgmlType type, const void* w, int64_t row_bytes, int64_t K, int64_t N,
                             const float* x, int64_t M, float* y, cudaStream_t stream) {
  if (N == 0 || M == 0) return cudaSuccess;
  switch (type) {
    case GgmlType::kF32:
      return MatMulCols<GgmlType::kF32>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kF16:
      return MatMulCols<GgmlType::kF16>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kBF16:
      return MatMulCols<GgmlType::kBF16>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kQ8_0:
      return MatMulCols<GgmlType::kQ8_0>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kQ4_0:
      return MatMulCols<GgmlType::kQ4_0>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kQ4_K:
      return MatMulCols<GgmlType::kQ4_K>(w, row_bytes, K, N, x, M, y, stream);
    case GgmlType::kQ6_K:
      return MatMulCols<GgmlType::kQ6_K>(w, row_bytes, K, N, x, M, y, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchDequantF16(GgmlType type, const void* w, int64_t row_bytes, int64_t K,
                             int64_t N, __half* out, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((K + 255) / 256), static_cast<unsigned>(N));
  DequantF16Kernel<<<grid, 256, 0, stream>>>(type, static_cast<const uint8_t*>(w), row_bytes, K,
                                             out);
  return cudaGetLastError();
}

cudaError_t LaunchF32ToF16(const float* x, __half* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  F32ToF16Kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
