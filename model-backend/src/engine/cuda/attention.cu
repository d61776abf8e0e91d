#include "cuda/attention.cuh"

namespace sinew::model::cuda {
namespace {

constexpr int kPerLane = static_cast<int>(kMaxHeadDim / kWarp);
constexpr int kWarpsPerBlock = 4;

// One warp per (token, head): lane l holds dimensions l, l + 32, ... of q and
// of the running output; each key costs one warp reduction.
__global__ void AttentionKernel(AttentionArgs a) {
  const int64_t item = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= a.n_tokens * a.n_head) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t t = item / a.n_head, h = item % a.n_head;
  const int64_t kvh = h / (a.n_head / a.n_head_kv);
  const int64_t off = kvh * a.head_dim;
  const float* qv = a.q + (t * a.n_head + h) * a.head_dim;
  float q[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + i * kWarp;
    q[i] = d < a.head_dim ? qv[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t n_keys = static_cast<int64_t>(a.rows.positions[t]) + 1;
  const int32_t* table = a.rows.Table(t);
  for (int64_t j = 0; j < n_keys; ++j) {
    const int64_t row = KvRowIndex(table, a.rows.block_size, j);
    const uint8_t* kr = a.k + row * a.k_row_bytes;
    const uint8_t* vr = a.v + row * a.v_row_bytes;
    float partial = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + i * kWarp;
      if (d < a.head_dim) partial += q[i] * LoadElem(a.k_type, kr, off + d);
    }
    const float s = WarpSum(partial) * a.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + i * kWarp;
      if (d < a.head_dim) acc[i] = acc[i] * correction + p * LoadElem(a.v_type, vr, off + d);
    }
    m = m_new;
  }
  float* o = a.out + (t * a.n_head + h) * a.head_dim;
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + i * kWarp;
    if (d < a.head_dim) o[d] = acc[i] * inv;
  }
}

}  // namespace

cudaError_t LaunchAttention(const AttentionArgs& args, cudaStream_t stream) {
  const int64_t items = args.n_tokens * args.n_head;
  if (items == 0) return cudaSuccess;
  if (args.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
  AttentionKernel<<<blocks, kWarpsPerBlock * kWarp, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace sinew::model::cuda
