// Model::ForwardPaged: the forward pass of a continuous batch over a paged KV
// cache. Linear layers run once over all tokens of all sequences, and so do
// the KV stores and attention: one backend op each per layer for the whole
// batch, reading every sequence's blocks through its own block table (no
// gathering into contiguous memory).
#include <cmath>

#include "model.h"
#include "paged_kv.h"

namespace sinew::model {
namespace {

Tensor View(float* base, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
  return Tensor::F32(base, ne0, ne1, ne2);
}

int64_t RoundUp4(int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace

Status Model::ForwardPaged(const PagedBatch& batch, PagedKvStore& kv, bool batch_invariant,
                           float* logits) {
  BackendOps& ops = backend_.ops();
  if (batch.graph_key == 0 || !ops.CapturesSteps()) {
    return RunPaged(batch, kv, batch_invariant, logits);
  }
  // A step graph: the ops are run, captured or only filled in for a replay;
  // nothing may be read back before EndStep, so the logits are read after.
  ops.BeginStep(batch.graph_key);
  Status status = RunPaged(batch, kv, batch_invariant, nullptr);
  SINEW_ASSIGN_OR_RETURN(const bool ran, ops.EndStep(status));
  if (!ran) status = RunPaged(batch, kv, batch_invariant, nullptr);
  SINEW_RETURN_IF_ERROR(status);
  if (logits == nullptr || kept_logits_ == 0) return Status::Ok();
  return ReadLogits(0, kept_logits_, logits);
}

Status Model::RunPaged(const PagedBatch& batch, PagedKvStore& kv, bool batch_invariant,
                       float* logits) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0) return Status::InvalidArgument("forward: empty batch");
  kept_logits_ = 0;
  // Backends whose rows are computed alike whatever the batch need no padding.
  const bool padded = PadsRows(batch_invariant);
  auto pad = [padded](int64_t rows) { return padded ? RoundUp4(rows) : rows; };
  const int64_t n_pad = pad(n);
  SINEW_RETURN_IF_ERROR(EnsureScratch(n_pad));
  BackendOps& ops = backend_.ops();
  const int64_t E = hp_.n_embd, HD = hp_.head_dim;
  const int64_t QD = int64_t{hp_.n_head} * HD, KD = int64_t{hp_.n_head_kv} * HD;

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

  std::vector<KvSeq> seqs;
  seqs.reserve(batch.seqs.size());
  for (const PagedSeq& s : batch.seqs) seqs.push_back({s.n_tokens, s.block_table});
  const KvBatch kv_batch{seqs, kv.block_size()};

  Tensor x = View(x_, E, n_pad);
  SINEW_RETURN_IF_ERROR(ops.GetRows(tok_embd_, ids, x));
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // Padding rows see zero attention output (they are never read, but stay
  // finite). Attention writes only the real rows, so once per pass suffices.
  if (n_pad > n) {
    const std::vector<float> zeros(static_cast<size_t>((n_pad - n) * QD), 0.0f);
    const size_t offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(attn_ + n * QD) -
                                              static_cast<uint8_t*>(scratch_->data()));
    SINEW_RETURN_IF_ERROR(scratch_->Write(offset, zeros.data(), zeros.size() * 4));
  }
  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    SINEW_RETURN_IF_ERROR(ProjectQkv(w, n_pad));
    Tensor kc = kv.k(l), vc = kv.v(l);
    // The real rows only: padding rows have no place in the cache.
    Tensor ks = View(k_, KD, n), vs = View(v_, KD, n);
    SINEW_RETURN_IF_ERROR(ops.StoreKv(ks, kc, kv_batch, positions_));
    SINEW_RETURN_IF_ERROR(ops.StoreKv(vs, vc, kv_batch, positions_));
    Tensor qs = View(q_, HD, hp_.n_head, n), as = View(attn_, HD, hp_.n_head, n);
    SINEW_RETURN_IF_ERROR(
        ops.Attention(qs, kc, vc, kv_batch, hp_.n_head_kv, positions_, scale, as));
    SINEW_RETURN_IF_ERROR(FinishLayer(w, n_pad));
  }
  // Gather the rows whose logits are wanted (in order) into h; padding rows
  // repeat the last wanted row (each row's logits depend on that row alone).
  std::vector<int32_t> rows;
  int64_t t0 = 0;
  for (const PagedSeq& s : batch.seqs) {
    if (s.n_logits < 0 || s.n_logits > s.n_tokens) {
      return Status::InvalidArgument("forward: n_logits outside [0, n_tokens]");
    }
    t0 += s.n_tokens;
    for (int64_t r = t0 - s.n_logits; r < t0; ++r) rows.push_back(static_cast<int32_t>(r));
  }
  const int64_t n_out = static_cast<int64_t>(rows.size());
  if (n_out == 0) return Status::Ok();
  const int64_t n_out_pad = pad(n_out);
  rows.resize(static_cast<size_t>(n_out_pad), rows.back());
  Tensor xs = View(x_, E, n_pad), wanted = View(h_, E, n_out_pad);
  SINEW_RETURN_IF_ERROR(ops.GetRows(xs, rows, wanted));
  return OutputLogits(wanted, n_out, logits);
}

}  // namespace sinew::model
