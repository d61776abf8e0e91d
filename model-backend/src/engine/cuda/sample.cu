#include "cuda/sample.cuh"
#include "sample_select.h"

namespace sinew::model::cuda {
namespace {

constexpr int kThreads = 128;

// sample_select.h's Block: this thread block, a strided loop per thread and a
// fixed tree in shared memory, so a row's result does not depend on timing.
struct DeviceBlock {
  unsigned char* smem;  // kThreads * select::kMaxAccBytes
  template <class Acc, class Map>
  __device__ Acc Reduce(int32_t n, Map map) {
    Acc a{};
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n; i += kThreads) map(i, a);
    Acc* buf = reinterpret_cast<Acc*>(smem);
    __syncthreads();  // every thread has read the previous reduction's total
    buf[threadIdx.x] = a;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
      if (static_cast<int>(threadIdx.x) < stride)
        buf[threadIdx.x].Combine(buf[threadIdx.x + stride]);
      __syncthreads();
    }
    return buf[0];
  }
};

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* x, int64_t n, const RowSampling* rows, const uint32_t* masks,
                     SampledToken* out) {
  __shared__ alignas(16) unsigned char smem[kThreads * select::kMaxAccBytes];
  DeviceBlock block{smem};
  const RowSampling r = rows[blockIdx.x];
  const uint32_t* mask = r.mask >= 0 ? masks + r.mask * MaskWords(n) : nullptr;
  const SampledToken t =
      select::SelectToken(block, x + r.row * n, static_cast<int32_t>(n), mask, r);
  if (threadIdx.x == 0) out[blockIdx.x] = t;
}

}  // namespace

cudaError_t LaunchSampleRows(const float* x, int64_t n, const RowSampling* rows, int64_t n_rows,
                             const uint32_t* masks, SampledToken* out, cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  SampleRowsKernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, n, rows, masks, out);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
