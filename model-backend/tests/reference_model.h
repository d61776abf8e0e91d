// An independent, straightforward reference implementation of the llama /
// qwen2 / qwen3 forward pass, for checking the engine. It shares no kernel
// code with the engine: its own dequantization of every tensor type (element
// by element from the format description), double-precision arithmetic, and
// full recomputation of attention for every position (no KV cache).
// Only the GGUF reader is shared.
//
// Thread-safety: a ReferenceModel is immutable after Load(); Logits() is const.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model::testing {

// Value of element `i` of a tensor stored as `type` at `data` (flat index).
double ReferenceDequantize(GgmlType type, const uint8_t* data, int64_t i);

class ReferenceModel {
 public:
  [[nodiscard]] static Result<std::unique_ptr<ReferenceModel>> Load(const std::string& path);

  int32_t n_vocab() const { return n_vocab_; }
  // Logits (n_vocab per position) for every position of `tokens`.
  std::vector<double> Logits(const std::vector<int32_t>& tokens) const;

 private:
  using Matrix = std::vector<double>;  // row-major [rows][cols]
  struct Layer {
    Matrix attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, gate, up, down;
  };
  Result<Matrix> Read(const std::string& name, bool required = true) const;
  std::vector<double> MatVec(const Matrix& w, const std::vector<double>& x) const;
  void Norm(std::vector<double>& x, size_t offset, size_t n, const Matrix& w) const;
  void Rotate(std::vector<double>& x, size_t offset, int64_t pos) const;

  std::unique_ptr<GgufFile> file_;
  std::string arch_;
  int32_t n_vocab_ = 0, n_embd_ = 0, n_layer_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0;
  int32_t n_ff_ = 0, n_rot_ = 0;
  double eps_ = 1e-5, base_ = 10000, freq_scale_ = 1;
  // YaRN (rope.scaling.type = yarn): interpolation ramp over the rotated pairs
  // [yarn_low_, yarn_high_] and the magnitude scale of cos and sin.
  bool yarn_ = false;
  double yarn_low_ = 0, yarn_high_ = 0, yarn_mscale_ = 1;
  bool neox_ = false;
  Matrix embd_, out_norm_, output_;
  std::vector<Layer> layers_;
};

}  // namespace sinew::model::testing
