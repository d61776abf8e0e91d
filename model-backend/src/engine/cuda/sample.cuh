// Sampling on the device (BackendOps::SampleRows): one thread block per
// sampled row runs the selection of sample_select.h, so only the tokens come
// back to the host, never the logits.
#pragma once
#include "cuda/common.cuh"
#include "sinew/model/backend.h"

namespace sinew::model::cuda {
// out[i] = the token of rows[i] (device arrays) from x (F32 [n, *]); masks:
// MaskWords(n) words per mask (device).
cudaError_t LaunchSampleRows(const float* x, int64_t n, const RowSampling* rows, int64_t n_rows,
                             const uint32_t* masks, SampledToken* out, cudaStream_t stream);
}  // namespace sinew::model::cuda
