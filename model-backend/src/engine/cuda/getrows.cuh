// GetRows: embedding lookup with dequantization (any of the seven types).
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
// out[i * ne0 + e] = dequantized row ids[i] of `table`; ids on the device.
cudaError_t LaunchGetRows(GgmlType type, const void* table, int64_t row_bytes, int64_t ne0,
                          const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
}  // namespace sinew::model::cuda
