#include "reference_model.h"

#include <algorithm>

#include <cmath>
#include <cstring>

namespace sinew::model::testing {
namespace {

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// IEEE half from its fields.
double Half(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 31, mant = h & 1023;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31) v = mant == 0 ? INFINITY : NAN;
  else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}

double Bfloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

double ReferenceDequantize(GgmlType type, const uint8_t* data, int64_t i) {
  switch (type) {
    case GgmlType::kF32: {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      return f;
    }
    case GgmlType::kF16: return Half(U16(data + 2 * i));
    case GgmlType::kBF16: return Bfloat(U16(data + 2 * i));
    case GgmlType::kQ8_0: {  // 34-byte blocks: f16 scale, 32 signed bytes
      const uint8_t* blk = data + (i / 32) * 34;
      return Half(U16(blk)) * static_cast<int8_t>(blk[2 + i % 32]);
    }
    case GgmlType::kQ4_0: {  // 18-byte blocks: f16 scale, 16 bytes of nibbles
      const uint8_t* blk = data + (i / 32) * 18;
      const int j = static_cast<int>(i % 32);
      const uint8_t byte = blk[2 + j % 16];
      const int nib = j < 16 ? (byte & 15) : (byte >> 4);
      return Half(U16(blk)) * (nib - 8);
    }
    case GgmlType::kQ4_K: {  // 144 bytes: d, dmin, 12 scale bytes, 128 nibble bytes
      const uint8_t* blk = data + (i / 256) * 144;
      const int r = static_cast<int>(i % 256);
      const int sub = r / 32, l = r % 32;
      const uint8_t* sc = blk + 4;
      int scale, min;
      if (sub < 4) {
        scale = sc[sub] & 63;
        min = sc[sub + 4] & 63;
      } else {
        scale = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4);
        min = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4);
      }
      const uint8_t byte = blk[16 + (sub / 2) * 32 + l];
      const int nib = sub % 2 == 0 ? (byte & 15) : (byte >> 4);
      return Half(U16(blk)) * scale * nib - Half(U16(blk + 2)) * min;
    }
    case GgmlType::kQ6_K: {  // 210 bytes: 128 low-nibble bytes, 64 high-bit bytes, 16 scales, d
      const uint8_t* blk = data + (i / 256) * 210;
      const int r = static_cast<int>(i % 256);
      const int half = r / 128, quadrant = (r % 128) / 32, l = r % 32;
      const uint8_t lo_byte = blk[64 * half + l + (quadrant % 2) * 32];
      const int lo = quadrant < 2 ? (lo_byte & 15) : (lo_byte >> 4);
      const int hi = (blk[128 + 32 * half + l] >> (2 * quadrant)) & 3;
      const int q = (lo | (hi << 4)) - 32;
      const int scale = static_cast<int8_t>(blk[192 + r / 16]);
      return Half(U16(blk + 208)) * scale * q;
    }
  }
  return NAN;
}

Result<ReferenceModel::Matrix> ReferenceModel::Read(const std::string& name, bool required) const {
  const GgufTensorInfo* t = file_->FindTensor(name);
  if (t == nullptr) {
    if (!required) return Matrix{};
    return Status::NotFound("reference: missing " + name);
  }
  Matrix m(static_cast<size_t>(t->n_elements));
  for (int64_t i = 0; i < t->n_elements; ++i) {
    m[static_cast<size_t>(i)] = ReferenceDequantize(t->type, t->data, i);
  }
  return m;
}

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::Load(const std::string& path) {
  std::unique_ptr<ReferenceModel> m(new ReferenceModel());
  SINEW_ASSIGN_OR_RETURN(m->file_, GgufFile::Open(path));
  const GgufFile& f = *m->file_;
  SINEW_ASSIGN_OR_RETURN(auto arch, f.GetString("general.architecture"));
  m->arch_ = std::string(arch);
  const std::string p = m->arch_ + ".";
  auto get = [&](const std::string& key, int64_t fallback) {
    return static_cast<int32_t>(f.GetIntOr(p + key, fallback).value_or(fallback));
  };
  m->n_embd_ = get("embedding_length", 0);
  m->n_layer_ = get("block_count", 0);
  m->n_ff_ = get("feed_forward_length", 0);
  m->n_head_ = get("attention.head_count", 1);
  m->n_head_kv_ = get("attention.head_count_kv", m->n_head_);
  m->head_dim_ = get("attention.key_length", m->n_embd_ / m->n_head_);
  m->n_rot_ = get("rope.dimension_count", m->head_dim_);
  m->eps_ = f.GetFloatOr(p + "attention.layer_norm_rms_epsilon", 1e-5).value_or(1e-5);
  m->base_ = f.GetFloatOr(p + "rope.freq_base", 10000).value_or(10000);
  const std::string scaling(f.GetStringOr(p + "rope.scaling.type", "none").value_or("none"));
  if (scaling == "linear" || scaling == "yarn") {
    m->freq_scale_ = 1.0 / f.GetFloatOr(p + "rope.scaling.factor", 1).value_or(1);
  }
  if (scaling == "yarn") {
    // YaRN (Peng et al. 2023) as GGUF engines apply it: pairs rotating fewer than
    // beta_slow times over the original context are interpolated, more than
    // beta_fast times extrapolated, a linear ramp between; attention logits grow
    // by (0.1 ln(factor) + 1)^2 through cos/sin scaled by 0.1 ln(factor) + 1.
    const double n_orig = static_cast<double>(get("rope.scaling.original_context_length",
                                                  get("context_length", 2048)));
    const double fast = f.GetFloatOr(p + "rope.scaling.yarn_beta_fast", 32).value_or(32);
    const double slow = f.GetFloatOr(p + "rope.scaling.yarn_beta_slow", 1).value_or(1);
    auto pair_for = [&](double rotations) {
      return m->n_rot_ * std::log(n_orig / (rotations * 2 * M_PI)) / (2 * std::log(m->base_));
    };
    m->yarn_ = true;
    m->yarn_low_ = std::max(0.0, std::floor(pair_for(fast)));
    m->yarn_high_ = std::min(static_cast<double>(m->n_rot_ - 1), std::ceil(pair_for(slow)));
    m->yarn_mscale_ = f.GetFloatOr(p + "rope.scaling.attn_factor", 1).value_or(1) *
                      (1 + 0.1 * std::log(1 / m->freq_scale_));
  }
  m->neox_ = m->arch_ != "llama";
  SINEW_ASSIGN_OR_RETURN(m->embd_, m->Read("token_embd.weight"));
  m->n_vocab_ = static_cast<int32_t>(m->embd_.size() / static_cast<size_t>(m->n_embd_));
  SINEW_ASSIGN_OR_RETURN(m->out_norm_, m->Read("output_norm.weight"));
  SINEW_ASSIGN_OR_RETURN(m->output_, m->Read("output.weight", false));
  if (m->output_.empty()) m->output_ = m->embd_;
  for (int32_t l = 0; l < m->n_layer_; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Layer L;
    SINEW_ASSIGN_OR_RETURN(L.attn_norm, m->Read(b + "attn_norm.weight"));
    SINEW_ASSIGN_OR_RETURN(L.wq, m->Read(b + "attn_q.weight"));
    SINEW_ASSIGN_OR_RETURN(L.wk, m->Read(b + "attn_k.weight"));
    SINEW_ASSIGN_OR_RETURN(L.wv, m->Read(b + "attn_v.weight"));
    SINEW_ASSIGN_OR_RETURN(L.wo, m->Read(b + "attn_output.weight"));
    SINEW_ASSIGN_OR_RETURN(L.bq, m->Read(b + "attn_q.bias", false));
    SINEW_ASSIGN_OR_RETURN(L.bk, m->Read(b + "attn_k.bias", false));
    SINEW_ASSIGN_OR_RETURN(L.bv, m->Read(b + "attn_v.bias", false));
    SINEW_ASSIGN_OR_RETURN(L.q_norm, m->Read(b + "attn_q_norm.weight", false));
    SINEW_ASSIGN_OR_RETURN(L.k_norm, m->Read(b + "attn_k_norm.weight", false));
    SINEW_ASSIGN_OR_RETURN(L.ffn_norm, m->Read(b + "ffn_norm.weight"));
    SINEW_ASSIGN_OR_RETURN(L.gate, m->Read(b + "ffn_gate.weight"));
    SINEW_ASSIGN_OR_RETURN(L.up, m->Read(b + "ffn_up.weight"));
    SINEW_ASSIGN_OR_RETURN(L.down, m->Read(b + "ffn_down.weight"));
    m->layers_.push_back(std::move(L));
  }
  return m;
}

std::vector<double> ReferenceModel::MatVec(const Matrix& w, const std::vector<double>& x) const {
  const size_t cols = x.size(), rows = w.size() / cols;
  std::vector<double> y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

void ReferenceModel::Norm(std::vector<double>& x, size_t offset, size_t n, const Matrix& w) const {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps_);
  for (size_t i = 0; i < n; ++i) x[offset + i] = x[offset + i] * inv * w[i];
}

void ReferenceModel::Rotate(std::vector<double>& x, size_t offset, int64_t pos) const {
  for (int32_t i = 0; i < n_rot_ / 2; ++i) {
    const double extrapolated =
        static_cast<double>(pos) * std::pow(base_, -2.0 * i / static_cast<double>(n_rot_));
    double angle = extrapolated * freq_scale_, scale = 1;
    if (yarn_) {
      const double ramp = std::clamp((i - yarn_low_) / std::max(0.001, yarn_high_ - yarn_low_),
                                     0.0, 1.0);
      const double keep = 1 - ramp;  // share of the extrapolated angle
      angle = extrapolated * (freq_scale_ * (1 - keep) + keep);
      scale = yarn_mscale_;
    }
    const size_t a = offset + static_cast<size_t>(neox_ ? i : 2 * i);
    const size_t b = offset + static_cast<size_t>(neox_ ? i + n_rot_ / 2 : 2 * i + 1);
    const double x0 = x[a], x1 = x[b];
    x[a] = scale * (x0 * std::cos(angle) - x1 * std::sin(angle));
    x[b] = scale * (x0 * std::sin(angle) + x1 * std::cos(angle));
  }
}

std::vector<double> ReferenceModel::Logits(const std::vector<int32_t>& tokens) const {
  const size_t T = tokens.size(), E = static_cast<size_t>(n_embd_);
  const size_t hd = static_cast<size_t>(head_dim_);
  const size_t group = static_cast<size_t>(n_head_ / n_head_kv_);
  std::vector<std::vector<double>> x(T);
  for (size_t t = 0; t < T; ++t) {
    x[t].assign(embd_.begin() + static_cast<std::ptrdiff_t>(tokens[t] * E),
                embd_.begin() + static_cast<std::ptrdiff_t>((tokens[t] + 1) * E));
  }
  for (const Layer& L : layers_) {
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> h = x[t];
      Norm(h, 0, E, L.attn_norm);
      q[t] = MatVec(L.wq, h);
      k[t] = MatVec(L.wk, h);
      v[t] = MatVec(L.wv, h);
      for (size_t i = 0; i < L.bq.size(); ++i) q[t][i] += L.bq[i];
      for (size_t i = 0; i < L.bk.size(); ++i) k[t][i] += L.bk[i];
      for (size_t i = 0; i < L.bv.size(); ++i) v[t][i] += L.bv[i];
      for (size_t h0 = 0; h0 < q[t].size(); h0 += hd) {
        if (!L.q_norm.empty()) Norm(q[t], h0, hd, L.q_norm);
        Rotate(q[t], h0, static_cast<int64_t>(t));
      }
      for (size_t h0 = 0; h0 < k[t].size(); h0 += hd) {
        if (!L.k_norm.empty()) Norm(k[t], h0, hd, L.k_norm);
        Rotate(k[t], h0, static_cast<int64_t>(t));
      }
    }
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> attn(q[t].size(), 0.0);
      for (size_t head = 0; head < static_cast<size_t>(n_head_); ++head) {
        const size_t kvh = head / group;
        std::vector<double> w(t + 1);
        double max = -INFINITY;
        for (size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (size_t d = 0; d < hd; ++d) dot += q[t][head * hd + d] * k[s][kvh * hd + d];
          w[s] = dot / std::sqrt(static_cast<double>(hd));
          max = std::max(max, w[s]);
        }
        double sum = 0;
        for (double& e : w) sum += (e = std::exp(e - max));
        for (size_t s = 0; s <= t; ++s) {
          for (size_t d = 0; d < hd; ++d) attn[head * hd + d] += w[s] / sum * v[s][kvh * hd + d];
        }
      }
      const std::vector<double> o = MatVec(L.wo, attn);
      for (size_t i = 0; i < E; ++i) x[t][i] += o[i];
      std::vector<double> h = x[t];
      Norm(h, 0, E, L.ffn_norm);
      std::vector<double> g = MatVec(L.gate, h);
      const std::vector<double> u = MatVec(L.up, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const std::vector<double> d = MatVec(L.down, g);
      for (size_t i = 0; i < E; ++i) x[t][i] += d[i];
    }
  }
  std::vector<double> logits;
  logits.reserve(T * static_cast<size_t>(n_vocab_));
  for (size_t t = 0; t < T; ++t) {
    std::vector<double> h = x[t];
    Norm(h, 0, E, out_norm_);
    const std::vector<double> l = MatVec(output_, h);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace sinew::model::testing
