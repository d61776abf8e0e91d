// Argmax over rows on the device: BackendOps::Argmax. Serving samples with
// SampleRows (sample.cuh), whose greedy rows give the same ids.
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
// out[r] = index of the largest of x[r * n .. r * n + n) (the first on ties).
cudaError_t LaunchArgmax(const float* x, int64_t n, int64_t rows, int32_t* out,
                         cudaStream_t stream);
}  // namespace sinew::model::cuda
