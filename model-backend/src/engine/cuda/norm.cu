#include "cuda/norm.cuh"

namespace sinew::model::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RmsNormKernel(const float* x, const float* weight, float eps, int64_t ne0,
                              float* out) {
  const float* in = x + blockIdx.x * ne0;
  float* o = out + blockIdx.x * ne0;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < ne0; i += kThreads) sum += in[i] * in[i];
  __shared__ float partial[kThreads / kWarp];
  sum = WarpSum(sum);
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = sum;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / kWarp; ++w) total += partial[w];
  const float scale = rsqrtf(total / static_cast<float>(ne0) + eps);
  for (int64_t i = threadIdx.x; i < ne0; i += kThreads) o[i] = in[i] * scale * weight[i];
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const float* weight, float eps, int64_t ne0,
                          int64_t rows, float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, eps, ne0, out);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
