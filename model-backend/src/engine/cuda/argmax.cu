#include "cuda/argmax.cuh"

namespace sinew::model::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void ArgmaxKernel(const float* x, int64_t n, int32_t* out) {
  const float* row = x + blockIdx.x * n;
  float best = -INFINITY;
  int64_t best_i = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    if (row[i] > best) {
      best = row[i];
      best_i = i;
    }
  }
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  values[threadIdx.x] = best;
  indices[threadIdx.x] = best_i;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float v = values[threadIdx.x + stride];
      const int64_t j = indices[threadIdx.x + stride];
      if (v > values[threadIdx.x] || (v == values[threadIdx.x] && j < indices[threadIdx.x])) {
        values[threadIdx.x] = v;
        indices[threadIdx.x] = j;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(indices[0]);
}

}  // namespace

cudaError_t LaunchArgmax(const float* x, int64_t n, int64_t rows, int32_t* out,
                         cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  ArgmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
