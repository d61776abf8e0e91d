#include "cuda/rope.cuh"

namespace sinew::model::cuda {
namespace {

__global__ void RopeKernel(float* x, int64_t head_dim, int64_t n_heads, const int32_t* positions,
                           bool neox, int32_t n_rot, float theta_scale_log2, float freq_scale,
                           const float* freq_factors) {
  const int64_t t = blockIdx.y;
  const int32_t half = n_rot / 2;
  const int64_t item = blockIdx.x * blockDim.x + threadIdx.x;  // (head, pair)
  if (item >= n_heads * half) return;
  const int64_t h = item / half;
  const int32_t i = static_cast<int32_t>(item % half);
  // theta_i = pos * scale * base^(-2i/n_rot), as the CPU computes it by repeated multiplication.
  const float theta = static_cast<float>(positions[t]) * freq_scale *
                      exp2f(theta_scale_log2 * static_cast<float>(i));
  const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
  float s, c;
  sincosf(theta / ff, &s, &c);
  float* v = x + (t * n_heads + h) * head_dim;
  const int32_t a = neox ? i : 2 * i;
  const int32_t b = neox ? i + half : 2 * i + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

}  // namespace

cudaError_t LaunchRope(float* x, int64_t head_dim, int64_t n_heads, int64_t n_tokens,
                       const int32_t* positions, RopeStyle style, int32_t n_rot, float freq_base,
                       float freq_scale, const float* freq_factors, cudaStream_t stream) {
  if (n_tokens == 0 || n_rot == 0) return cudaSuccess;
  const int64_t items = n_heads * (n_rot / 2);
  const dim3 grid(static_cast<unsigned>((items + 127) / 128), static_cast<unsigned>(n_tokens));
  const float theta_scale_log2 = -2.0f / static_cast<float>(n_rot) * log2f(freq_base);
  RopeKernel<<<grid, 128, 0, stream>>>(x, head_dim, n_heads, positions, style == RopeStyle::kNeox,
                                       n_rot, theta_scale_log2, freq_scale, freq_factors);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
