// Backend: where tensors live (BackendMemory, BackendBuffer) and what runs on
// them (BackendOps). The CPU backend is the reference; the CUDA backend
// (src/engine/cuda/) implements the same interface on device memory, and the
// op-level test (model-backend/tests/backend_ops_test.cc) compares every
// backend with the scalar CPU reference by normalised mean squared error.
//
// Tensors passed to ops must live in memory of the same backend (for the CPU
// backend: any host memory; for CUDA: its device buffers). Callers never
// dereference a tensor's data on the host: they move bytes with the buffer's
// Write/Read. Activations are contiguous F32; weights may be any GgmlType. An
// op's output may alias an input only where its comment says so.
//
// Thread-safety: a Backend runs one op at a time (its ops use its own worker
// threads inside); buffers are not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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
  // Many copies at once, done when it returns (a device queues them all and
  // waits once). Each as Read or Write; on an error some may have been done.
  struct HostCopy {
    size_t offset = 0;  // in this buffer
    void* host = nullptr;
    size_t n = 0;
  };
  [[nodiscard]] virtual Status ReadMany(std::span<const HostCopy> copies) const;
  [[nodiscard]] virtual Status WriteMany(std::span<const HostCopy> copies);

 protected:
  // OutOfRange unless [offset, offset + n) lies within size(); `what`: "read"
  // or "write", for the message.
  [[nodiscard]] Status CheckRange(size_t offset, size_t n, const char* what) const;
};

// A buffer in host memory: Read and Write copy with memcpy. The subclass owns
// (and frees) the memory, or not.
class HostMemoryBuffer : public BackendBuffer {
 public:
  void* data() override { return data_; }
  size_t size() const override { return size_; }
  [[nodiscard]] Status Write(size_t offset, const void* src, size_t n) override;
  [[nodiscard]] Status Read(size_t offset, void* dst, size_t n) const override;

 protected:
  HostMemoryBuffer(void* data, size_t size) : data_(data), size_(size) {}

 private:
  void* data_;
  size_t size_;
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
  // Host memory that this backend's buffers copy to and from fastest (the KV
  // swap space): page-locked on CUDA, so that Read and Write into it go by DMA
  // with no staging; on the CPU, memory the kernel provides as it is touched.
  // data() is a host pointer. ResourceExhausted if it cannot be allocated.
  [[nodiscard]] virtual Result<std::unique_ptr<BackendBuffer>> AllocateHost(size_t bytes) = 0;
  // The device's memory, free and in all, for sizing the KV cache after the
  // weights; nullopt for backends on host memory (the CPU).
  struct DeviceMemoryInfo {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
  };
  virtual std::optional<DeviceMemoryInfo> DeviceBytes() const { return std::nullopt; }
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
  // YaRN (as ggml's rope): for rotated pair i (dimension 2i) with extrapolated
  // angle a = pos * freq_base^(-2i/n_rot) / freq_factor, the angle is
  // a * (freq_scale * (1 - m) + m), m = ext_factor * (1 - clamp((i - corr_low) /
  // max(0.001, corr_high - corr_low), 0, 1)); cos and sin are multiplied by
  // attn_factor, and by 1 + 0.1 * ln(1 / freq_scale) when ext_factor != 0.
  // ext_factor 0 and attn_factor 1 are plain (linear-scaled) RoPE.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float corr_low = 0.0f;   // first pair that is interpolated (see YarnCorrDims)
  float corr_high = 0.0f;  // last pair that is still partly extrapolated
};

// ggml's YaRN correction range for a model trained on n_ctx_orig positions:
// the pairs whose wavelength spans between beta_fast and beta_slow rotations
// over the original context, as {floor(low), ceil(high)} clamped to [0, n_rot - 1].
std::pair<float, float> YarnCorrDims(int32_t n_rot, int32_t n_ctx_orig, float freq_base,
                                     float beta_fast, float beta_slow);

// InvalidArgument unless every id is a row of a table of table_rows rows or
// FedToken(e) for an entry e < n_fed of the last QueueSampleRows. What both
// backends check before GetRows reads anything.
[[nodiscard]] Status CheckGetRowsIds(std::span<const int32_t> ids, int64_t table_rows,
                                     int64_t n_fed);

// The ops of a backend, named for Supports() and error messages.
enum class Op {
  kGetRows,
  kMatMul,
  kAddBias,
  kAdd,
  kRmsNorm,
  kRope,
  kSwiGlu,
  kStoreKv,
  kAttention,
  kArgmax,
  kSampleRows,
};
std::string_view OpName(Op op);

// Where one sequence's positions live in a paged KV tensor (a tensor of
// n_blocks * block_size rows): position p is row
// table[p / block_size] * block_size + p % block_size. A contiguous cache is one
// block of n_ctx rows with table {0}.
struct KvBlocks {
  std::span<const int32_t> table;
  int32_t block_size = 0;
};

// The rows of a batch in a paged KV tensor, for StoreKv and Attention: the
// batch holds its sequences' rows back to back, seqs[i].n_rows of them for
// sequence i, whose positions live in the blocks of seqs[i].table (as in
// KvBlocks). Decode rows and prompt chunks of different sequences mix in one
// batch. Host memory; a device backend copies it.
struct KvSeq {
  int32_t n_rows = 0;
  std::span<const int32_t> table;
};
struct KvBatch {
  std::span<const KvSeq> seqs;
  int32_t block_size = 0;
};
// InvalidArgument unless the sequences' rows add up to `rows`, every row has
// a position, and each row's table covers its position with blocks inside a
// cache tensor of cache_rows rows. What both backends check before touching
// a cache.
[[nodiscard]] Status CheckKvBatch(const KvBatch& batch, std::span<const int32_t> positions,
                                  int64_t rows, int64_t cache_rows);

// How SampleRows turns one row of logits into a token: the transforms of
// Sampler::Sample (sampling.h) that follow its penalties, with the random draw
// made by the caller, so that the sampler's generator and its seed stay on the
// host. Tokens outside the row's mask are -infinity first. Then greedy (or
// temperature <= 0): the largest logit, the first on ties. Otherwise: the
// tokens in order of logit (larger first, lower id first on ties), the first
// top_k of them if top_k > 0, softmax at `temperature`, the shortest prefix whose
// probability reaches top_p, those with probability >= min_p times the first's,
// and the first token where the running sum of probabilities exceeds u times
// their total (the last if rounding leaves none).
struct RowSampling {
  int32_t row = 0;  // which row of the logits
  bool greedy = true;
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double u = 0;       // the draw, uniform in [0, 1)
  int32_t mask = -1;  // which mask of `masks`; -1: every token allowed
};
// id: the token, -1 if the mask allowed none; logprob: its log-probability under
// the softmax (temperature 1) of the masked logits, as Sampler reports it.
struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;
};
// The GetRows id that stands for entry `e` of the last QueueSampleRows.
constexpr int32_t FedToken(int32_t e) { return -1 - e; }
// Words of one mask in SampleRows: bit (i % 32) of word i / 32 allows token i.
constexpr int64_t MaskWords(int64_t n_vocab) { return (n_vocab + 31) / 32; }
// InvalidArgument unless every entry of `rows` names its own row below n_rows, a mask
// of `masks` (or -1) and parameters in range (temperature in [0, 100], top_k >=
// 0, top_p in (0, 1], min_p in [0, 1], u in [0, 1)), and `out` has room for all.
// What both backends check before SampleRows touches anything.
[[nodiscard]] Status CheckRowSampling(std::span<const RowSampling> rows, int64_t n_rows,
                                      int64_t n_vocab, std::span<const uint32_t> masks,
                                      size_t out_size);

// The compute part of a backend. Every op returns a Status: InvalidArgument
// for shapes or types it was not given by contract, Unimplemented for a type
// the backend lacks (see Supports), Internal for a device error (naming the
// call that failed). A device backend may queue the work and report an
// asynchronous error at a later op, Synchronize() or buffer Read.
//
// Index arrays (ids, positions, block tables) and RopeParams::freq_factors are
// host memory and need only live for the call.
class BackendOps {
 public:
  virtual ~BackendOps() = default;

  // Whether `op` runs with `type` as its typed operand: the table for kGetRows,
  // the weight for kMatMul, the cache tensor (K or V) for kStoreKv and
  // kAttention. The other ops take F32 only. The model asks at load, so a
  // missing op is a load error, never a wrong result.
  virtual bool Supports(Op op, GgmlType type) const = 0;

  // Whether every op computes each row (token) with the same arithmetic whatever
  // the number of rows and their position in the batch, so that a token's
  // results are bit-identical batched or alone without padding the batch.
  // Optional: false (the default) makes batch-invariant callers pad the rows
  // to a multiple of four.
  virtual bool RowInvariant() const { return false; }
  // Asks the backend to compute every row alike whatever the batch from now on,
  // at whatever speed that costs (a GPU gives up tensor cores for long prompts).
  // Returns RowInvariant() afterwards. Optional: a backend that cannot keeps
  // false, and batch-invariant callers pad instead.
  virtual bool MakeRowInvariant() { return RowInvariant(); }

  // How many rows (tokens) a matrix product takes per load of each weight vector:
  // up to the next multiple of it, extra rows cost little more than memory-bound
  // decode already pays (speculative drafts fill them). Optional: 1 (the default).
  virtual int32_t RowGroup() const { return 1; }

  // out[:, i] = dequantized table row ids[i]. table: any type [n_embd, n_rows];
  // out: F32 [n_embd, ids.size()]. An id may also be FedToken(e): the token of
  // entry e of the last QueueSampleRows, read where the sample left it (on a
  // device it never comes through the host; row 0 where that entry's mask
  // allowed no token). InvalidArgument for an id outside the table or an
  // entry that sample did not have.
  [[nodiscard]] virtual Status GetRows(const Tensor& table, std::span<const int32_t> ids,
                                       Tensor& out) = 0;
  // y[n, m] = sum_k w[k, n] * x[k, m]. w: any type [K, N]; x: F32 [K, M]; y: F32 [N, M].
  // Quantized weights may use quantized activations (documented per type).
  [[nodiscard]] virtual Status MatMul(const Tensor& w, const Tensor& x, Tensor& y) = 0;
  // y[:, m] += bias. bias: F32 [N]. In place.
  [[nodiscard]] virtual Status AddBias(Tensor& y, const Tensor& bias) = 0;
  // out = a + b, elementwise, same shapes. out may alias a or b.
  [[nodiscard]] virtual Status Add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // Each row r of x (length ne[0]): out = x / sqrt(mean(x^2) + eps) * weight.
  // weight: F32 [ne0]. out may alias x.
  [[nodiscard]] virtual Status RmsNorm(const Tensor& x, const Tensor& weight, float eps,
                                       Tensor& out) = 0;
  // Rotary embedding in place. x: F32 [head_dim, n_heads, n_tokens];
  // positions: n_tokens entries.
  [[nodiscard]] virtual Status Rope(Tensor& x, std::span<const int32_t> positions,
                                    const RopeParams& params) = 0;
  // out = silu(gate) * up, elementwise. out may alias gate or up.
  [[nodiscard]] virtual Status SwiGlu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // Writes the F32 rows of `src` [ne0, n] into the paged cache tensor `dst`
  // (F32, F16 or Q8_0, same ne0), converting: row r goes to position
  // positions[r] of its sequence in `batch`. Errors: those of CheckKvBatch.
  [[nodiscard]] virtual Status StoreKv(const Tensor& src, Tensor& dst, const KvBatch& batch,
                                       std::span<const int32_t> positions) = 0;
  // Causal attention of a batch of sequences over their paged caches, in one
  // call. q: F32 [head_dim, n_head, n_tokens]; k, v: paged cache tensors (F32,
  // F16 or Q8_0) of rows head_dim * n_head_kv wide; query token t sits at
  // position positions[t] of its sequence in `batch` and sees that sequence's
  // positions 0..positions[t]. out: F32 [head_dim, n_head, n_tokens]. n_head
  // must be a multiple of n_head_kv. Errors: those of CheckKvBatch.
  [[nodiscard]] virtual Status Attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const KvBatch& batch, int32_t n_head_kv,
                                         std::span<const int32_t> positions, float scale,
                                         Tensor& out) = 0;
  // out[r] = index of the largest value of row r of x (F32 [n, rows]; the first
  // on ties), for greedy sampling without reading the logits back. out is host
  // memory of x.rows() entries; the call waits for the result.
  [[nodiscard]] virtual Status Argmax(const Tensor& x, std::span<int32_t> out) = 0;
  // out[i] = the token sampled from row rows[i].row of x (F32 [n_vocab, n]) as
  // RowSampling says, for a whole batch in one call, so that only tokens come
  // back from a device, never the logits. masks: MaskWords(n_vocab) words per
  // mask, back to back (host memory). The sampled rows of x may be overwritten
  // (scratch). out is host memory; the call waits for the result. Errors:
  // InvalidArgument for a row, mask or parameter out of range.
  [[nodiscard]] Status SampleRows(Tensor& x, std::span<const RowSampling> rows,
                                  std::span<const uint32_t> masks, std::span<SampledToken> out) {
    SINEW_RETURN_IF_ERROR(QueueSampleRows(x, rows, masks));
    return TakeSampled(out);
  }
  // SampleRows in two halves, so that the host works while a device samples:
  // QueueSampleRows queues the sampling of rows.size() entries (the same
  // checks; nothing is queued on an error) and returns; TakeSampled waits for
  // those tokens and copies them to `out` (host memory of exactly that many
  // entries). Until the next QueueSampleRows the tokens also stay where GetRows
  // reads FedToken ids, so that a step's tokens feed the next step's forward
  // before the host has them. A new QueueSampleRows drops tokens not taken.
  [[nodiscard]] virtual Status QueueSampleRows(Tensor& x, std::span<const RowSampling> rows,
                                               std::span<const uint32_t> masks) = 0;
  [[nodiscard]] virtual Status TakeSampled(std::span<SampledToken> out) = 0;
  // Whether ops return before their work is done (a device queue), so that
  // host work between them overlaps it. Optional: false (the CPU computes in
  // the call).
  virtual bool QueuesWork() const { return false; }
  // Waits until queued work is done; the first error of that work, if any.
  [[nodiscard]] virtual Status Synchronize() { return Status::Ok(); }

  // Step graphs (optional): a backend that CapturesSteps() records the ops of a
  // step the second time it sees its key and afterwards replays the recording
  // (a CUDA graph) instead of launching each kernel. The caller brackets the
  // ops of a step with BeginStep(key) and EndStep(status of those ops), giving
  // the same key only to steps that issue the same ops on the same shapes and
  // buffers (index arrays may differ in content, and grow a little). EndStep
  // returns true when the step has run (or is queued) and false when the ops
  // were only recorded for a replay that did not match them (a shape or buffer
  // changed, or the recording failed): the caller then issues them again
  // without BeginStep, and they run directly. No op may read results back
  // between the two calls.
  virtual bool CapturesSteps() const { return false; }
  virtual void BeginStep(uint64_t /*key*/) {}
  [[nodiscard]] virtual Result<bool> EndStep(const Status& /*ops*/) { return true; }
  struct StepGraphCounts {
    uint64_t captures = 0;  // steps recorded
    uint64_t replays = 0;   // steps run from a recording
    uint64_t misses = 0;    // replays that did not match and ran directly
  };
  virtual StepGraphCounts step_graph_counts() const { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // "cpu" or "cuda:N".
  virtual std::string device() const = 0;
  virtual BackendMemory& memory() = 0;
  virtual BackendOps& ops() = 0;
};

struct CpuBackendOptions {
  // Worker threads including the caller; 0 means one per online CPU. Default: 0
  int32_t n_threads = 0;
  // "auto", "avx512", "avx2" or "scalar". Default: "auto" (the highest level the CPU
  // has). SINEW_CPU_LEVEL=scalar|avx2|avx512 in the environment caps the levels the CPU is
  // taken to have: "auto" picks at most the cap, and a level above it is Unimplemented as
  // on a CPU without it. An unknown SINEW_CPU_LEVEL is InvalidArgument.
  std::string simd = "auto";
};

struct CudaBackendOptions {
  // CUDA device ordinal. Default: 0
  int32_t device = 0;
};

// The CUDA backend (only in builds with SINEW_CUDA; see HaveCudaBackend()).
// Unavailable when there is no such CUDA device (naming what the driver said);
// Unimplemented in builds without CUDA. Its name() is "cuda-sm<cc>".
[[nodiscard]] Result<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);
// Whether this build contains the CUDA backend.
bool HaveCudaBackend();

// The backend for a device string: "cpu" (with `cpu`'s options), "cuda" (=
// "cuda:0") or "cuda:N". InvalidArgument for anything else; the errors of the
// backend's factory.
[[nodiscard]] Result<std::unique_ptr<Backend>> CreateBackendForDevice(std::string_view device,
                                                                      const CpuBackendOptions& cpu);

// The CPU backend. InvalidArgument for an unknown SIMD level, Unimplemented for
// a level this CPU lacks. Its name() is "cpu-<level>", e.g. "cpu-avx512".
[[nodiscard]] Result<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options);

}  // namespace sinew::model
