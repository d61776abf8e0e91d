// Tensor: a typed, shaped view of memory that lives in a backend buffer.
//
// A Tensor does not own its memory: `data` points into a BackendBuffer (or a
// mapped GGUF file) that must outlive it. Shapes are ggml-style, fastest
// dimension first: ne[0] elements per row, rows are contiguous, ne[1..3] count
// rows. Quantized types store ne[0] / block-size blocks per row.
//
// Thread-safety: a plain value; the memory it points at is synchronised by the
// owner of the buffer.
#pragma once

#include <array>
#include <cstdint>

#include "sinew/model/gguf.h"

namespace sinew::model {

struct Tensor {
  GgmlType type = GgmlType::kF32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  void* data = nullptr;

  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t elements() const { return ne[0] * rows(); }
  int64_t row_bytes() const { return GgmlRowSize(type, ne[0]); }
  int64_t bytes() const { return row_bytes() * rows(); }
  // Pointer to row `r` (counting across ne[1..3]).
  uint8_t* row(int64_t r) const { return static_cast<uint8_t*>(data) + r * row_bytes(); }
  float* f32() const { return static_cast<float*>(data); }

  static Tensor F32(float* p, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    Tensor t;
    t.type = GgmlType::kF32;
    t.ne = {ne0, ne1, ne2, 1};
    t.data = p;
    return t;
  }
};

}  // namespace sinew::model
