// GetRows: embedding lookup with dequantization (any of the seven types).
#pragma once
#include "cuda/common.cuh"
#include "sinew/model/backend.h"

namespace sinew::model::cuda {
// out[i * ne0 + e] = dequantized row ids[i] of `table`; ids on the device. An id
// FedToken(e) reads row fed[e].id (row 0 where that is -1); `fed`: device
// memory, may be null when no id is fed.
cudaError_t LaunchGetRows(GgmlType type, const void* table, int64_t row_bytes, int64_t ne0,
                          const int32_t* ids, const SampledToken* fed, int64_t n_ids, float* out,
                          cudaStream_t stream);
}  // namespace sinew::model::cuda
