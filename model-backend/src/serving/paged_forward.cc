// Model::ForwardPaged: the forward pass of a continuous batch over a paged KV
// cache. Linear layers run once over all tokens of all sequences; attention
// runs per sequence over its blocks, gathered into contiguous scratch.
#include <cmath>
#include <cstring>

#include "model.h"
#include "paged_kv.h"

namespace sinew::model {
namespace {

Tensor View(float* base, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
  return Tensor::F32(base, ne0, ne1, ne2);
}

int64_t RoundUp4(int64_t n) { return (n + 3) / 4 * 4; }

// Writes `n` rows of `src` (F32, from row `first`) at positions pos0.. of a
// sequence into the paged tensor `dst` via its block table.
void ScatterRows(BackendOps& ops, const float* src, int64_t width, int32_t pos0, int32_t n,
                 std::span<const int32_t> table, int32_t block_size, Tensor& dst) {
  int32_t done = 0;
  while (done < n) {
    const int32_t pos = pos0 + done;
    const int32_t in_block = pos % block_size;
    const int32_t run = std::min(n - done, block_size - in_block);
    const int64_t row = int64_t{table[static_cast<size_t>(pos / block_size)]} * block_size + in_block;
    Tensor piece = Tensor::F32(const_cast<float*>(src) + int64_t{done} * width, width, run);
    ops.CopyRows(piece, dst, row);
    done += run;
  }
}

// Copies positions [0, n_pos) of a sequence from the paged tensor `src` into
// contiguous rows of `out`.
Tensor GatherRows(const Tensor& src, int32_t n_pos, std::span<const int32_t> table,
                  int32_t block_size, std::vector<uint8_t>& out) {
  const int64_t row_bytes = src.row_bytes();
  out.resize(static_cast<size_t>(row_bytes * n_pos));
  for (int32_t pos = 0; pos < n_pos; pos += block_size) {
    const int32_t run = std::min(block_size, n_pos - pos);
    const int64_t row = int64_t{table[static_cast<size_t>(pos / block_size)]} * block_size;
    std::memcpy(out.data() + int64_t{pos} * row_bytes, src.row(row),
                static_cast<size_t>(row_bytes * run));
  }
  Tensor t = src;
  t.ne = {src.ne[0], n_pos, 1, 1};
  t.data = out.data();
  return t;
}

}  // namespace

Status Model::ForwardPaged(const PagedBatch& batch, PagedKvStore& kv, bool batch_invariant,
                           float* logits) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0) return Status::InvalidArgument("forward: empty batch");
  auto pad = [batch_invariant](int64_t rows) { return batch_invariant ? RoundUp4(rows) : rows; };
  const int64_t n_pad = pad(n);
  SINEW_RETURN_IF_ERROR(EnsureScratch(n_pad));
  BackendOps& ops = backend_.ops();
  const int64_t E = hp_.n_embd, HD = hp_.head_dim;
  const int64_t QD = int64_t{hp_.n_head} * HD, KD = int64_t{hp_.n_head_kv} * HD;
  const int32_t bs = kv.block_size();

  std::vector<int32_t> ids(static_cast<size_t>(n_pad), batch.tokens[0]);
  std::copy(batch.tokens.begin(), batch.tokens.end(), ids.begin());
  positions_.assign(static_cast<size_t>(n_pad), 0);
  {
    int64_t t = 0;
    for (const PagedSeq& s : batch.seqs) {
      for (int32_t i = 0; i < s.n_tokens; ++i) positions_[static_cast<size_t>(t++)] = s.pos0 + i;
    }
    if (t != n) return Status::InvalidArgument("forward: sequence sizes disagree with the batch");
  }

  Tensor x = View(x_, E, n_pad);
  ops.GetRows(tok_embd_, ids.data(), n_pad, x);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    ProjectQkv(w, n_pad);
    Tensor kc = kv.k(l), vc = kv.v(l);
    int64_t t0 = 0;
    for (const PagedSeq& s : batch.seqs) {
      ScatterRows(ops, k_ + t0 * KD, KD, s.pos0, s.n_tokens, s.block_table, bs, kc);
      ScatterRows(ops, v_ + t0 * KD, KD, s.pos0, s.n_tokens, s.block_table, bs, vc);
      const int32_t n_pos = s.pos0 + s.n_tokens;
      Tensor kg = GatherRows(kc, n_pos, s.block_table, bs, kv.gather_k());
      Tensor vg = GatherRows(vc, n_pos, s.block_table, bs, kv.gather_v());
      Tensor qs = View(q_ + t0 * QD, HD, hp_.n_head, s.n_tokens);
      Tensor as = View(attn_ + t0 * QD, HD, hp_.n_head, s.n_tokens);
      ops.Attention(qs, kg, vg, hp_.n_head_kv, positions_.data() + t0, scale, as);
      t0 += s.n_tokens;
    }
    std::fill(attn_ + n * QD, attn_ + n_pad * QD, 0.0f);
    FinishLayer(w, n_pad);
  }
  // Compact the rows whose logits are wanted to the front of x (in order).
  int64_t n_out = 0, t0 = 0;
  for (const PagedSeq& s : batch.seqs) {
    t0 += s.n_tokens;
    if (!s.want_logits) continue;
    if (t0 - 1 != n_out) std::memmove(x_ + n_out * E, x_ + (t0 - 1) * E, static_cast<size_t>(E) * 4);
    ++n_out;
  }
  if (n_out == 0) return Status::Ok();
  const int64_t n_out_pad = pad(n_out);
  std::fill(x_ + n_out * E, x_ + n_out_pad * E, 0.0f);
  return OutputLogits(0, n_out_pad, n_out, logits);
}

}  // namespace sinew::model
