// StoreKv: F32 rows into a paged cache tensor (F32, F16 or Q8_0), converting.
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {
// Row r of src (ne0 floats) goes to cache row rows.CacheRow(r): its position
// in its sequence's blocks. For Q8_0, ne0 is a multiple of 32.
cudaError_t LaunchStoreKv(const float* src, int64_t ne0, int64_t n_rows, GgmlType type,
                          void* dst, int64_t dst_row_bytes, const KvRows& rows,
                          cudaStream_t stream);
}  // namespace sinew::model::cuda
