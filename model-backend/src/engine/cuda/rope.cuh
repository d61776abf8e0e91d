// Rope: rotary embedding in place, normal (adjacent pairs) or NeoX (halves),
// with frequency base, linear scaling and optional frequency factors.
#pragma once
#include "cuda/common.cuh"
#include "sinew/model/backend.h"

namespace sinew::model::cuda {
// x: [head_dim, n_heads, n_tokens]; positions (n_tokens) and freq_factors
// (n_rot / 2, or null) on the device.
cudaError_t LaunchRope(float* x, int64_t head_dim, int64_t n_heads, int64_t n_tokens,
                       const int32_t* positions, RopeStyle style, int32_t n_rot, float freq_base,
                       float freq_scale, const float* freq_factors, cudaStream_t stream);
}  // namespace sinew::model::cuda
