// Backend: where tensors live (BackendMemory, BackendBuffer) and what runs on
// them (BackendOps). The CPU backend implements both now and is the reference;
// a CUDA backend implements the same interface later, and the op-level test
// (model-backend/tests/backend_ops_test.cc) compares any backend with the
// scalar CPU reference by normalised mean squared error.
//
// Tensors passed to ops must live in memory of the same backend (for the CPU
// backend: any host memory). Activations are contiguous F32; weights may be any
// GgmlType. Every op may be called with the output aliasing an input only where
// its comment says so.
//
// Thread-safety: a Backend runs one op at a time (its ops use its own worker
// threads inside); buffers are not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sinew/model/tensor.h"
#include "sinew/status.h"

namespace sinew::model {

// A block of backend memory. Owns it, unless it wraps host memory it was given.
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  // Base address in the backend's address space (host pointer for the CPU).
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  // Host <-> buffer copies. OutOfRange if [offset, offset+n) exceeds size().
  [[nodiscard]] virtual Status Write(size_t offset, const void* src, size_t n) = 0;
  [[nodiscard]] virtual Status Read(size_t offset, void* dst, size_t n) const = 0;
};

// The memory part of a backend.
class BackendMemory {
 public:
  virtual ~BackendMemory() = default;
  // A zero-filled buffer. ResourceExhausted if it cannot be allocated.
  [[nodiscard]] virtual Result<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) = 0;
  // Uses host memory in place (e.g. weights in a mapped GGUF file) if the
  // backend can; the memory must outlive the buffer. Unimplemented if the
  // backend cannot (then Allocate + Write).
  [[nodiscard]] virtual Result<std::unique_ptr<BackendBuffer>> WrapHost(const void* data,
                                                                        size_t bytes) = 0;
};

enum class RopeStyle {
  kNormal,  // rotates adjacent pairs (x[2i], x[2i+1]) (llama)
  kNeox,    // rotates (x[i], x[i + n_rot/2]) (qwen2, qwen3, NeoX)
};

struct RopeParams {
  RopeStyle style = RopeStyle::kNormal;
  int32_t n_rot = 0;          // rotated dimensions per head (<= head size, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // positions are multiplied by this (linear scaling)
  const float* freq_factors = nullptr;  // optional n_rot/2 divisors of the frequencies
};

// The compute part of a backend.
class BackendOps {
 public:
  virtual ~BackendOps() = default;

  // out[:, i] = dequantized table row ids[i]. table: any type [n_embd, n_rows];
  // out: F32 [n_embd, n_ids]. REQUIRES: ids in range.
  virtual void GetRows(const Tensor& table, const int32_t* ids, int64_t n_ids, Tensor& out) = 0;
  // y[n, m] = sum_k w[k, n] * x[k, m]. w: any type [K, N]; x: F32 [K, M]; y: F32 [N, M].
  // Quantized weights may use quantized activations (documented per type).
  virtual void MatMul(const Tensor& w, const Tensor& x, Tensor& y) = 0;
  // y[:, m] += bias. bias: F32 [N]. In place.
  virtual void AddBias(Tensor& y, const Tensor& bias) = 0;
  // out = a + b, elementwise, same shapes. out may alias a or b.
  virtual void Add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // Each row r of x (length ne[0]): out = x / sqrt(mean(x^2) + eps) * weight.
  // weight: F32 [ne0]. out may alias x.
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // Rotary embedding in place. x: F32 [head_dim, n_heads, n_tokens];
  // positions: n_tokens entries.
  virtual void Rope(Tensor& x, const int32_t* positions, const RopeParams& params) = 0;
  // out = silu(gate) * up, elementwise. out may alias gate or up.
  virtual void SwiGlu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // Copies F32 rows `src` [ne0, n] into rows [first_row, first_row + n) of
  // `dst` (F32 or F16, same ne0), converting.
  virtual void CopyRows(const Tensor& src, Tensor& dst, int64_t first_row) = 0;
  // Causal attention of one sequence. q: F32 [head_dim, n_head, n_tokens];
  // k, v: F32 or F16 [head_dim * n_head_kv, n_kv] (a row per position); the
  // query token t sits at position positions[t] and sees keys 0..positions[t].
  // out: F32 [head_dim, n_head, n_tokens]. n_head must be a multiple of n_head_kv.
  virtual void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int32_t n_head_kv,
                         const int32_t* positions, float scale, Tensor& out) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual BackendMemory& memory() = 0;
  virtual BackendOps& ops() = 0;
};

struct CpuBackendOptions {
  // Worker threads including the caller; 0 means one per online CPU. Default: 0
  int32_t n_threads = 0;
  // "auto", "avx512", "avx2" or "scalar". Default: "auto"
  std::string simd = "auto";
};

// The CPU backend. InvalidArgument for an unknown SIMD level, Unimplemented for
// a level this CPU lacks. Its name() is "cpu-<level>", e.g. "cpu-avx512".
[[nodiscard]] Result<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options);

}  // namespace sinew::model
