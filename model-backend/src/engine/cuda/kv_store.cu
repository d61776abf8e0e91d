#include "cuda/kv_store.cuh"

namespace sinew::model::cuda {
namespace {

__global__ void StoreFloatKernel(const float* src, int64_t ne0, bool f16, uint8_t* dst,
                                 int64_t row_bytes, KvRows rows) {
  const int64_t r = blockIdx.y;
  uint8_t* row = dst + rows.CacheRow(r) * row_bytes;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < ne0; i += gridDim.x * blockDim.x) {
    const float v = src[r * ne0 + i];
    if (f16) {
      reinterpret_cast<__half*>(row)[i] = __float2half_rn(v);
    } else {
      reinterpret_cast<float*>(row)[i] = v;
    }
  }
}

// One warp per Q8_0 block: amax / 127 scale, round half away from zero (as the CPU).
__global__ void StoreQ8_0Kernel(const float* src, int64_t ne0, uint8_t* dst, int64_t row_bytes,
                                KvRows rows) {
  const int64_t r = blockIdx.y;
  const int64_t n_blocks = ne0 / quant::kQK8_0;
  const int64_t b = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (b >= n_blocks) return;
  const int lane = threadIdx.x % kWarp;
  const float v = src[r * ne0 + b * quant::kQK8_0 + lane];
  const float amax = WarpMax(fabsf(v));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  auto* blocks = reinterpret_cast<quant::BlockQ8_0*>(dst + rows.CacheRow(r) * row_bytes);
  blocks[b].qs[lane] = static_cast<int8_t>(roundf(v * id));
  if (lane == 0) blocks[b].d = __half_as_ushort(__float2half_rn(d));
}

}  // namespace

cudaError_t LaunchStoreKv(const float* src, int64_t ne0, int64_t n_rows, GgmlType type,
                          void* dst, int64_t dst_row_bytes, const KvRows& rows,
                          cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  uint8_t* out = static_cast<uint8_t*>(dst);
  if (type == GgmlType::kQ8_0) {
    const int64_t n_blocks = ne0 / quant::kQK8_0;
    const dim3 grid(static_cast<unsigned>((n_blocks + 7) / 8), static_cast<unsigned>(n_rows));
    StoreQ8_0Kernel<<<grid, 8 * kWarp, 0, stream>>>(src, ne0, out, dst_row_bytes, rows);
  } else {
    const dim3 grid(static_cast<unsigned>((ne0 + 255) / 256), static_cast<unsigned>(n_rows));
    StoreFloatKernel<<<grid, 256, 0, stream>>>(src, ne0, type == GgmlType::kF16, out,
                                               dst_row_bytes, rows);
  }
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
