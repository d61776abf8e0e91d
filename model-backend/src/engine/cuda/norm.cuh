// RmsNorm: out = x / sqrt(mean(x^2) + eps) * weight, one block per row; out may alias x.
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
cudaError_t LaunchRmsNorm(const float* x, const float* weight, float eps, int64_t ne0,
                          int64_t rows, float* out, cudaStream_t stream);
}  // namespace sinew::model::cuda
