// Model::Forward: the forward pass of a batch of sequences over a paged KV
// cache. Linear layers run once over all tokens of all sequences, and so do
// the KV stores and attention: one backend op each per layer for the whole
// batch, reading every sequence's blocks through its own block table (no
// gathering into contiguous memory).
#include <algorithm>
#include <cmath>
#include <vector>

#include "model.h"

namespace sinew::model {
namespace {

Tensor View(float* base, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
  return Tensor::F32(base, ne0, ne1, ne2);
}

int64_t RoundUp4(int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace

Status Model::EnsureScratch(int64_t n) {
  if (n <= scratch_tokens_) return Status::Ok();
  const int64_t E = hp_.n_embd, QD = int64_t{hp_.n_head} * hp_.head_dim;
  const int64_t KD = int64_t{hp_.n_head_kv} * hp_.head_dim;
  const int64_t sizes[] = {E * n, E * n, QD * n, KD * n, KD * n, QD * n, hp_.n_ff * n,
                           hp_.n_ff * n, int64_t{hp_.n_vocab} * n};
  int64_t total = 0;
  for (int64_t s : sizes) total += (s + 15) / 16 * 16;
  scratch_.reset();
  SINEW_ASSIGN_OR_RETURN(scratch_, backend_.memory().Allocate(static_cast<size_t>(total) * 4));
  float* base = static_cast<float*>(scratch_->data());
  float** slots[] = {&x_, &h_, &q_, &k_, &v_, &attn_, &gate_, &up_, &logits_};
  for (size_t i = 0; i < std::size(slots); ++i) {
    *slots[i] = base;
    base += (sizes[i] + 15) / 16 * 16;
  }
  scratch_tokens_ = n;
  return Status::Ok();
}

Status Model::Forward(const ForwardBatch& batch, KvCache& kv, bool batch_invariant, float* logits) {
  BackendOps& ops = backend_.ops();
  if (batch.graph_key == 0 || !ops.CapturesSteps()) {
    return RunForward(batch, kv, batch_invariant, logits);
  }
  // A step graph: the ops are run, captured or only filled in for a replay;
  // nothing may be read back before EndStep, so the logits are read after.
  ops.BeginStep(batch.graph_key);
  Status status = RunForward(batch, kv, batch_invariant, nullptr);
  SINEW_ASSIGN_OR_RETURN(const bool ran, ops.EndStep(status));
  if (!ran) status = RunForward(batch, kv, batch_invariant, nullptr);
  SINEW_RETURN_IF_ERROR(status);
  if (logits == nullptr || kept_logits_ == 0) return Status::Ok();
  return ReadLogits(0, kept_logits_, logits);
}

Status Model::RunForward(const ForwardBatch& batch, KvCache& kv, bool batch_invariant,
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
    for (const ForwardSeq& s : batch.seqs) {
      for (int32_t i = 0; i < s.n_tokens; ++i) positions_[static_cast<size_t>(t++)] = s.pos0 + i;
    }
    if (t != n) return Status::InvalidArgument("forward: sequence sizes disagree with the batch");
  }

  std::vector<KvSeq> seqs;
  seqs.reserve(batch.seqs.size());
  for (const ForwardSeq& s : batch.seqs) seqs.push_back({s.n_tokens, s.block_table});
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
  // The rows whose logits are wanted, in order; padding rows repeat the last wanted row
  // (each row's logits depend on that row alone).
  std::vector<int32_t> rows;
  int64_t t0 = 0;
  for (const ForwardSeq& s : batch.seqs) {
    if (s.n_logits < 0 || s.n_logits > s.n_tokens) {
      return Status::InvalidArgument("forward: n_logits outside [0, n_tokens]");
    }
    t0 += s.n_tokens;
    for (int64_t r = t0 - s.n_logits; r < t0; ++r) rows.push_back(static_cast<int32_t>(r));
  }
  const int64_t n_out = static_cast<int64_t>(rows.size());
  const int64_t n_out_pad = n_out == 0 ? 0 : pad(n_out);
  if (n_out > 0) rows.resize(static_cast<size_t>(n_out_pad), rows.back());
  // After the last layer's attention only the wanted rows go on (its output projection and
  // feed-forward, a twelfth of a prompt's work in a 12-layer model): gathered to the front
  // of attn and x. Rows are computed alike whatever the batch, so their logits are the
  // same bits. Not in a step graph, whose replays take the shapes it was captured with.
  const bool gather_last = batch.graph_key == 0 && n_out_pad < n_pad;
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
    if (l + 1 < hp_.n_layer || !gather_last) {
      SINEW_RETURN_IF_ERROR(FinishLayer(w, n_pad));
      continue;
    }
    if (n_out == 0) return Status::Ok();  // the cache is written; nothing else is wanted
    // Through q and h (free now), so that no copy reads rows it has overwritten.
    std::vector<int32_t> front(static_cast<size_t>(n_out_pad));
    for (int64_t i = 0; i < n_out_pad; ++i) front[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    Tensor attn_all = View(attn_, QD, n_pad), attn_tmp = View(q_, QD, n_out_pad);
    Tensor x_all = View(x_, E, n_pad), x_tmp = View(h_, E, n_out_pad);
    SINEW_RETURN_IF_ERROR(ops.GetRows(attn_all, rows, attn_tmp));
    SINEW_RETURN_IF_ERROR(ops.GetRows(x_all, rows, x_tmp));
    Tensor attn_front = View(attn_, QD, n_out_pad), x_front = View(x_, E, n_out_pad);
    SINEW_RETURN_IF_ERROR(ops.GetRows(attn_tmp, front, attn_front));
    SINEW_RETURN_IF_ERROR(ops.GetRows(x_tmp, front, x_front));
    SINEW_RETURN_IF_ERROR(FinishLayer(w, n_out_pad));
    return OutputLogits(x_front, n_out, logits);
  }
  if (n_out == 0) return Status::Ok();
  Tensor xs = View(x_, E, n_pad), wanted = View(h_, E, n_out_pad);
  SINEW_RETURN_IF_ERROR(ops.GetRows(xs, rows, wanted));
  return OutputLogits(wanted, n_out, logits);
}

Status Model::ProjectQkv(const LayerWeights& w, int64_t n) {
  BackendOps& ops = backend_.ops();
  const int64_t E = hp_.n_embd, HD = hp_.head_dim;
  const int64_t QD = int64_t{hp_.n_head} * HD, KD = int64_t{hp_.n_head_kv} * HD;
  Tensor x = View(x_, E, n), h = View(h_, E, n);
  SINEW_RETURN_IF_ERROR(ops.RmsNorm(x, w.attn_norm, hp_.rms_eps, h));
  Tensor q = View(q_, QD, n), k = View(k_, KD, n), v = View(v_, KD, n);
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.wq, h, q));
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.wk, h, k));
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.wv, h, v));
  if (w.bq.data != nullptr) SINEW_RETURN_IF_ERROR(ops.AddBias(q, w.bq));
  if (w.bk.data != nullptr) SINEW_RETURN_IF_ERROR(ops.AddBias(k, w.bk));
  if (w.bv.data != nullptr) SINEW_RETURN_IF_ERROR(ops.AddBias(v, w.bv));
  Tensor qh = View(q_, HD, hp_.n_head, n), kh = View(k_, HD, hp_.n_head_kv, n);
  if (w.q_norm.data != nullptr) SINEW_RETURN_IF_ERROR(ops.RmsNorm(qh, w.q_norm, hp_.rms_eps, qh));
  if (w.k_norm.data != nullptr) SINEW_RETURN_IF_ERROR(ops.RmsNorm(kh, w.k_norm, hp_.rms_eps, kh));
  const std::span<const int32_t> pos(positions_.data(), static_cast<size_t>(n));
  SINEW_RETURN_IF_ERROR(ops.Rope(qh, pos, hp_.rope));
  return ops.Rope(kh, pos, hp_.rope);
}

Status Model::FinishLayer(const LayerWeights& w, int64_t n) {
  BackendOps& ops = backend_.ops();
  const int64_t E = hp_.n_embd, F = hp_.n_ff, QD = int64_t{hp_.n_head} * hp_.head_dim;
  Tensor x = View(x_, E, n), h = View(h_, E, n);
  Tensor attn2 = View(attn_, QD, n), o = View(h_, E, n);
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.wo, attn2, o));
  SINEW_RETURN_IF_ERROR(ops.Add(x, o, x));
  SINEW_RETURN_IF_ERROR(ops.RmsNorm(x, w.ffn_norm, hp_.rms_eps, h));
  Tensor gate = View(gate_, F, n), up = View(up_, F, n);
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.w_gate, h, gate));
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.w_up, h, up));
  SINEW_RETURN_IF_ERROR(ops.SwiGlu(gate, up, gate));
  SINEW_RETURN_IF_ERROR(ops.MatMul(w.w_down, gate, o));
  return ops.Add(x, o, x);
}

Status Model::OutputLogits(const Tensor& rows, int64_t n_read, float* logits) {
  BackendOps& ops = backend_.ops();
  const int64_t n_rows = rows.rows();
  Tensor ho = View(h_, hp_.n_embd, n_rows);
  SINEW_RETURN_IF_ERROR(ops.RmsNorm(rows, output_norm_, hp_.rms_eps, ho));
  Tensor out = View(logits_, hp_.n_vocab, n_rows);
  SINEW_RETURN_IF_ERROR(ops.MatMul(output_, ho, out));
  kept_logits_ = n_read;
  if (logits == nullptr) return Status::Ok();
  return ReadLogits(0, n_read, logits);
}

Status Model::ReadLogits(int64_t first, int64_t n, float* dst) {
  if (first < 0 || n < 0 || first + n > kept_logits_) {
    return Status::InvalidArgument("logits rows [" + std::to_string(first) + ", " +
                                   std::to_string(first + n) + ") outside the " +
                                   std::to_string(kept_logits_) + " of the last forward");
  }
  const size_t offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(logits_) -
                                            static_cast<uint8_t*>(scratch_->data())) +
                        static_cast<size_t>(first * hp_.n_vocab) * 4;
  return scratch_->Read(offset, dst, static_cast<size_t>(n * hp_.n_vocab) * 4);
}

Status Model::QueueSampleLogits(std::span<const RowSampling> rows,
                                std::span<const uint32_t> masks) {
  Tensor kept = View(logits_, hp_.n_vocab, kept_logits_);
  return backend_.ops().QueueSampleRows(kept, rows, masks);
}

}  // namespace sinew::model
