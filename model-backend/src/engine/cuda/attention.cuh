// Attention: fused causal GQA attention of a batch of sequences in one launch,
// with online softmax (FlashAttention style: one pass over the keys, no score
// matrix), each token reading the paged KV cache (F32, F16 or Q8_0) through
// its own sequence's block table.
#pragma once
#include "cuda/common.cuh"

namespace sinew::model::cuda {

constexpr int64_t kMaxHeadDim = 256;

struct AttentionArgs {
  const float* q = nullptr;  // [head_dim, n_head, n_tokens]
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  GgmlType k_type = GgmlType::kF16, v_type = GgmlType::kF16;
  int64_t k_row_bytes = 0, v_row_bytes = 0;
  KvRows rows;  // token t: rows.positions[t] in its sequence's blocks
  int64_t head_dim = 0, n_head = 0, n_head_kv = 0, n_tokens = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [head_dim, n_head, n_tokens]
};

// REQUIRES: head_dim <= kMaxHeadDim.
cudaError_t LaunchAttention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace sinew::model::cuda
