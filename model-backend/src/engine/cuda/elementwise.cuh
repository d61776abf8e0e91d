// Elementwise ops on F32: Add (out may alias), AddBias (in place), SwiGlu (out may alias).
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// y[r * ne0 + i] += bias[i] for rows r.
cudaError_t LaunchAddBias(float* y, const float* bias, int64_t ne0, int64_t rows,
                          cudaStream_t stream);
// out = silu(gate) * up.
cudaError_t LaunchSwiGlu(const float* gate, const float* up, float* out, int64_t n,
                         cudaStream_t stream);
}  // namespace sinew::model::cuda
