#include "copy_circuit.h"

#include <cmath>

namespace sinew::model::testing {
namespace {

constexpr int64_t kHeadDim = 64;
constexpr int64_t kKvHeads = 4;
constexpr int64_t kCodeDims = 192;     // residual [0, 192): the token's code
constexpr int64_t kConst = 192;        // a constant, the layer-0 queries' and keys' source
constexpr int64_t kBack = 5;           // layer 0 brings in the 5 tokens before each position
constexpr int64_t kSlot = 48;          // code values [0, 48) of each of them, in a slot:
constexpr int64_t kPrev = 256;         // [256 + 48 (d - 1), + 48): the token d back
constexpr int64_t kOut = 512;          // [512, 704): the code of the token layer 1 predicts
constexpr int64_t kOutSlot = 64;       // of it, each of 3 layer-1 heads writes 64 values
constexpr int kLivePairs = 8;          // RoPE pairs that rotate; the rest are stopped
constexpr int64_t kContext = kBack;    // layer 1 matches the current token and the 4 before it
constexpr int64_t kMatch = 9;          // code values per token a layer-1 head compares
constexpr double kPositionScore = 20;  // layer-0 score per live pair (sharp: > 0.9999)
constexpr double kMatchScore = 2;      // layer-1 score per matching code value

// The token's code: kCodeDims values of +-1 from a hash of (token, index).
float Code(int64_t token, int64_t i) {
  uint64_t z = static_cast<uint64_t>(token * kCodeDims + i) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z & 1) != 0 ? 1.0f : -1.0f;
}

struct Shape {
  int64_t E, n_head, group;
  double rope_base;
  // RMS of the residual entering layer 0 (code and constant) and layer 1 (plus
  // kBack slots of +-1).
  double rms0, rms1;
  double constant;
};

Shape ShapeOf(const RandomModelSpec& s) {
  Shape sh;
  sh.E = s.n_embd;
  sh.n_head = s.n_head;
  sh.group = s.n_head / kKvHeads;
  sh.rope_base = s.rope_base;
  sh.constant = std::sqrt(static_cast<double>(kCodeDims));
  sh.rms0 = std::sqrt((kCodeDims + sh.constant * sh.constant) / static_cast<double>(sh.E));
  sh.rms1 = std::sqrt((kCodeDims + sh.constant * sh.constant + kBack * kSlot) /
                      static_cast<double>(sh.E));
  return sh;
}

class Matrix {
 public:
  Matrix(int64_t k, int64_t n) : k_(k), v_(static_cast<size_t>(k * n), 0.0f) {}
  void Set(int64_t row, int64_t col, double value) {
    v_[static_cast<size_t>(row * k_ + col)] = static_cast<float>(value);
  }
  std::vector<float> Take() { return std::move(v_); }

 private:
  int64_t k_;
  std::vector<float> v_;
};

// Layer 0: q head d - 1 looks d places back (d = 1..kBack); every KV head's keys are
// the constant and its values the code's first kSlot values.
void Layer0(const Shape& sh, const std::string& what, Matrix& m) {
  const double x_const = sh.constant / sh.rms0;  // the constant after the RMS norm
  const double gain =
      std::sqrt(kPositionScore * std::sqrt(static_cast<double>(kHeadDim))) / x_const;
  for (int64_t qh = 0; qh < kBack; ++qh) {
    if (what == "attn_q") {
      for (int i = 0; i < kLivePairs; ++i) {
        // Rotated by (t - s) * theta against the key's (1, 0): peaks at t - s = qh + 1.
        const double angle =
            static_cast<double>(qh + 1) * std::pow(sh.rope_base, -2.0 * i / kHeadDim);
        m.Set(qh * kHeadDim + 2 * i, kConst, gain * std::cos(angle));
        m.Set(qh * kHeadDim + 2 * i + 1, kConst, -gain * std::sin(angle));
      }
    } else if (what == "attn_output") {
      for (int64_t j = 0; j < kSlot; ++j) m.Set(kPrev + qh * kSlot + j, qh * kHeadDim + j, 1.0);
    }
  }
  for (int64_t h = 0; h < kKvHeads; ++h) {
    if (what == "attn_k") {
      for (int i = 0; i < kLivePairs; ++i) m.Set(h * kHeadDim + 2 * i, kConst, gain);
    } else if (what == "attn_v") {
      for (int64_t j = 0; j < kSlot; ++j) m.Set(h * kHeadDim + j, j, sh.rms0);
    }
  }
}

// Layer 1: head group h compares code values [9h, 9h + 9) of the current token and
// the 4 before it with each position's 5 predecessors; groups h < 3 copy code values
// [64h, 64h + 64) of the matched position into the output slot.
void Layer1(const Shape& sh, const std::string& what, Matrix& m) {
  const double gain = std::sqrt(kMatchScore * std::sqrt(static_cast<double>(kHeadDim))) * sh.rms1;
  const int64_t unrotated = 2 * kLivePairs;
  for (int64_t h = 0; h < kKvHeads; ++h) {
    const int64_t slice = kMatch * h;
    if (what == "attn_q") {
      for (int64_t qh = h * sh.group; qh < (h + 1) * sh.group; ++qh) {
        for (int64_t part = 0; part < kContext; ++part) {
          const int64_t source = part == 0 ? 0 : kPrev + (part - 1) * kSlot;
          for (int64_t j = 0; j < kMatch; ++j) {
            m.Set(qh * kHeadDim + unrotated + part * kMatch + j, source + slice + j, gain);
          }
        }
      }
    } else if (what == "attn_k") {
      for (int64_t part = 0; part < kContext; ++part) {
        for (int64_t j = 0; j < kMatch; ++j) {
          m.Set(h * kHeadDim + unrotated + part * kMatch + j, kPrev + part * kSlot + slice + j,
                gain);
        }
      }
    } else if (h < 3 && what == "attn_v") {
      for (int64_t j = 0; j < kOutSlot; ++j) m.Set(h * kHeadDim + j, h * kOutSlot + j, sh.rms1);
    } else if (h < 3 && what == "attn_output") {
      for (int64_t j = 0; j < kOutSlot; ++j)
        m.Set(kOut + h * kOutSlot + j, h * sh.group * kHeadDim + j, 1.0);
    }
  }
}

}  // namespace

Status CheckCopyCircuitSpec(const RandomModelSpec& s) {
  const int64_t hd = s.head_dim > 0 ? s.head_dim : (s.n_head > 0 ? s.n_embd / s.n_head : 0);
  if (s.arch != "llama" || hd != kHeadDim || s.n_head_kv != kKvHeads || s.n_head % kKvHeads != 0 ||
      s.n_head < 8 || (s.rope_dims != 0 && s.rope_dims != kHeadDim) ||
      s.n_embd < kOut + 3 * kOutSlot || s.n_layer < 2 || s.tied_output) {
    return Status::InvalidArgument(
        "the copy circuit needs a llama with head_dim 64, 4 KV heads and 8 or more heads, "
        "full RoPE, n_embd >= 704, 2 or more layers and its own output matrix");
  }
  return Status::Ok();
}

std::vector<float> CopyCircuitTensor(const RandomModelSpec& s, const std::string& name, int64_t k,
                                     int64_t n) {
  const Shape sh = ShapeOf(s);
  if (name.ends_with("norm.weight")) return std::vector<float>(static_cast<size_t>(k * n), 1.0f);
  if (name == "rope_freqs.weight") {
    // Frequency factors divide RoPE's angles: the pairs past the live ones stand still.
    std::vector<float> v(static_cast<size_t>(k), 1e30f);
    for (int i = 0; i < kLivePairs; ++i) v[static_cast<size_t>(i)] = 1.0f;
    return v;
  }
  Matrix m(k, n);
  if (name == "token_embd.weight" || name == "output.weight") {
    const bool embd = name == "token_embd.weight";
    for (int64_t token = 0; token < n; ++token) {
      for (int64_t i = 0; i < kCodeDims; ++i) m.Set(token, (embd ? 0 : kOut) + i, Code(token, i));
      if (embd) m.Set(token, kConst, sh.constant);
    }
    return m.Take();
  }
  // blk.L.<what>.weight
  const size_t dot = name.find('.', 4);
  const int layer = std::stoi(name.substr(4, dot - 4));
  const std::string what = name.substr(dot + 1, name.rfind('.') - dot - 1);
  if (layer == 0) Layer0(sh, what, m);
  if (layer == 1) Layer1(sh, what, m);
  return m.Take();
}

}  // namespace sinew::model::testing
