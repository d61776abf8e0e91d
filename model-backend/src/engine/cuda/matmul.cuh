// Matrix products with weights of any of the seven types.
//
// Dispatch (cuda_backend.cu): up to kMatMulCols columns (decode batches of up to
// 8 tokens), and every M once the backend is row invariant (MakeRowInvariant:
// the ServingEngine's batch-invariant mode), run LaunchMatMulCols, a memory-bound
// kernel that reads the weight blocks in place (one warp per output row, each
// lane one block-sized unit at a time (common.cuh DotUnit), F32 activations, up
// to 8 columns per pass, 32 when M > 8), whose arithmetic per (row, column) does
// not depend on M. Otherwise M > 8 dequantizes the weight to F16 (LaunchDequantF16, F16
// weights skip it), converts the activations to F16 and runs a cuBLAS GEMM with
// F32 accumulation on the tensor cores (F32 weights: SGEMM), whose algorithm,
// and so the bits of a row, may change with M. This first rule is to be revised
// by the measurements of bench/run_gpu_bench.sh (docs/model-engine.md).
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
// Columns per pass of LaunchMatMulCols up to M = 8 (4x that beyond).
constexpr int kMatMulCols = 8;
// y[m][n] = sum_k w[n][k] * x[m][k] for N rows of K elements of `type` and M
// columns of x (F32 [K, M]; y F32 [N, M]), each (n, m) with the same arithmetic
// whatever M.
cudaError_t LaunchMatMulCols(GgmlType type, const void* w, int64_t row_bytes, int64_t K, int64_t N,
                             const float* x, int64_t M, float* y, cudaStream_t stream);
// out[r * K + k] = dequantized w[r][k] as F16, for N rows.
cudaError_t LaunchDequantF16(GgmlType type, const void* w, int64_t row_bytes, int64_t K,
                             int64_t N, __half* out, cudaStream_t stream);
// out[i] = F16(x[i]).
cudaError_t LaunchF32ToF16(const float* x, __half* out, int64_t n, cudaStream_t stream);
}  // namespace sinew::model::cuda
