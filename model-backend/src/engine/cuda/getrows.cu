#include "cuda/getrows.cuh"

namespace sinew::model::cuda {
namespace {

__global__ void GetRowsKernel(GgmlType type, const uint8_t* table, int64_t row_bytes, int64_t ne0,
                              const int32_t* ids, const SampledToken* fed, float* out) {
  const int64_t i = blockIdx.y;
  int32_t id = ids[i];
  if (id < 0) id = max(fed[-1 - id].id, 0);  // FedToken(e) = -1 - e
  const uint8_t* row = table + static_cast<int64_t>(id) * row_bytes;
  for (int64_t e = blockIdx.x * blockDim.x + threadIdx.x; e < ne0; e += gridDim.x * blockDim.x) {
    out[i * ne0 + e] = LoadElem(type, row, e);
  }
}

}  // namespace

cudaError_t LaunchGetRows(GgmlType type, const void* table, int64_t row_bytes, int64_t ne0,
                          const int32_t* ids, const SampledToken* fed, int64_t n_ids, float* out,
                          cudaStream_t stream) {
  if (n_ids == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((ne0 + 255) / 256), static_cast<unsigned>(n_ids));
  GetRowsKernel<<<grid, 256, 0, stream>>>(type, static_cast<const uint8_t*>(table), row_bytes, ne0,
                                          ids, fed, out);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
