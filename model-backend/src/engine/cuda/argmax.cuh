// Argmax over rows on the device (greedy sampling without copying the logits
// back): BackendOps::Argmax. The engine's sampler does not use it yet.
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
// out[r] = index of the largest of x[r * n .. r * n + n) (the first on ties).
cudaError_t LaunchArgmax(const float* x, int64_t n, int64_t rows, int32_t* out,
                         cudaStream_t stream);
}  // namespace sinew::model::cuda
