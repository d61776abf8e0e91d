// Model: the weights and forward pass of a decoder-only transformer (llama,
// qwen2, qwen3) on a backend.
//
// Forward() runs a batch of tokens from one or many sequences against a paged
// KvCache (kv_cache.h): the ServingEngine's continuous batches, and the
// Engine's one sequence in a cache of one block.
//
// Ownership: the Model keeps pointers into the GgufFile (mapped weights), which
// must outlive it, and owns the backend buffers it allocates.
// Activations, scratch and the KV cache live in buffers of the backend; the
// model moves bytes to and from them only through BackendBuffer Write/Read.
//
// Thread-safety: Forward() is not reentrant (it uses scratch buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "sinew/model/backend.h"
#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model {

struct HParams {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  RopeParams rope;
};

struct LayerWeights {
  Tensor attn_norm, wq, wk, wv, wo;
  Tensor bq, bk, bv;          // biases (qwen2); data == nullptr if absent
  Tensor q_norm, k_norm;      // per-head RMSNorm (qwen3); data == nullptr if absent
  Tensor ffn_norm, w_gate, w_up, w_down;
};

// One sequence's part of a batch: n_tokens consecutive tokens from position
// pos0, whose KV rows go to (and whose attention reads) the blocks of
// block_table, which covers positions [0, pos0 + n_tokens).
struct ForwardSeq {
  int32_t n_tokens = 0;
  int32_t pos0 = 0;
  std::span<const int32_t> block_table;
  int32_t n_logits = 0;  // logits of its last n_logits tokens (0..n_tokens), in order
};

// Tokens of all sequences, back to back in the order of `seqs`.
struct ForwardBatch {
  // The sequences' tokens back to back. A token may be FedToken(e) (backend.h):
  // the token of entry e of the last Model::QueueSampleLogits, not yet on the host.
  std::vector<int32_t> tokens;
  std::vector<ForwardSeq> seqs;
  // Non-zero: the step's key for BackendOps::BeginStep (a step graph), given
  // only to batches whose ops have the same shapes whenever they have this key
  // (the scheduler's decode buckets). 0: no graph.
  uint64_t graph_key = 0;
};

class Model {
 public:
  // Errors: Unimplemented (architecture, rope scaling), Corruption (missing
  // tensor, wrong shape, metadata out of range).
  [[nodiscard]] static Result<std::unique_ptr<Model>> Load(const GgufFile& file, Backend& backend);

  const HParams& hparams() const { return hp_; }
  int64_t n_params() const { return n_params_; }
  GgmlType main_weight_type() const { return main_type_; }

  // Runs a batch of tokens from one or many sequences against `kv`, writing
  // n_vocab logits for each sequence that wants them, in batch order, to host
  // `logits`; with logits == nullptr they stay in the backend's memory for
  // ReadLogits and QueueSampleLogits (until the next forward). With
  // `batch_invariant` every weight multiplication sees the rows padded to a
  // multiple of four where the backend needs it (PadsRows), so a token's
  // results do not depend on what else is in the batch (batched and single
  // runs agree exactly) at the price of up to 3 wasted rows per step.
  // Errors: InvalidArgument for an empty batch, sequence sizes that disagree
  // with it, n_logits outside [0, n_tokens], or rows outside the cache
  // (CheckKvBatch); the backend's.
  [[nodiscard]] Status Forward(const ForwardBatch& batch, KvCache& kv, bool batch_invariant,
                               float* logits);
  // Copies rows [first, first + n) of the logits the last Forward kept
  // to host `dst` (n * n_vocab floats). InvalidArgument outside them.
  [[nodiscard]] Status ReadLogits(int64_t first, int64_t n, float* dst);
  // BackendOps::QueueSampleRows over the logits the last Forward kept (row
  // i of RowSampling: its i-th logits row); the sampled rows become scratch.
  // The next Forward may feed its tokens (FedToken ids in ForwardBatch) before
  // TakeSampled brings them to the host.
  [[nodiscard]] Status QueueSampleLogits(std::span<const RowSampling> rows,
                                         std::span<const uint32_t> masks);
  [[nodiscard]] Status TakeSampled(std::span<SampledToken> out) {
    return backend_.ops().TakeSampled(out);
  }
  // Waits for the backend's queued work (BackendOps::Synchronize).
  [[nodiscard]] Status Synchronize() { return backend_.ops().Synchronize(); }
  // Whether the backend queues its work (BackendOps::QueuesWork).
  bool QueuesWork() const { return backend_.ops().QueuesWork(); }
  // The backend's step-graph counts (BackendOps::step_graph_counts).
  BackendOps::StepGraphCounts step_graph_counts() const {
    return backend_.ops().step_graph_counts();
  }
  // Whether the backend replays steps from graphs (BackendOps::CapturesSteps).
  bool CapturesSteps() const { return backend_.ops().CapturesSteps(); }
  // Whether a batch-invariant Forward pads its rows to a multiple of four
  // (backends whose ops are not RowInvariant need it).
  bool PadsRows(bool batch_invariant) const {
    return batch_invariant && !backend_.ops().RowInvariant();
  }
  // A step's rows come in groups of this many: padded (PadsRows) or sharing each
  // weight load (BackendOps::RowGroup); rows up to the next multiple are cheap.
  int32_t CheapRowGroup(bool batch_invariant) const {
    return PadsRows(batch_invariant) ? 4 : backend_.ops().RowGroup();
  }

 private:
  explicit Model(Backend& backend) : backend_(backend) {}
  Status LoadHParams(const GgufFile& file);
  // rope.scaling.type = yarn: fills hp_.rope from the `prefix`rope.scaling.* keys.
  Status LoadYarn(const GgufFile& file, const std::string& prefix);
  Status LoadWeights(const GgufFile& file);
  Result<Tensor> Weight(const GgufFile& file, const std::string& name,
                        std::vector<int64_t> shape, bool required = true);
  Result<Tensor> F32Vector(const GgufFile& file, const std::string& name, int64_t n,
                           bool required = true);
  Status EnsureScratch(int64_t n_tokens);
  // The parts of a layer around attention, over scratch rows 0..n-1.
  // ProjectQkv: h = norm(x); q, k, v projected (biases, q/k norms) and rotated at
  // positions_. FinishLayer, once attention has written attn_: output projection and
  // residual, then the SwiGLU feed-forward and residual.
  Status ProjectQkv(const LayerWeights& w, int64_t n);
  Status FinishLayer(const LayerWeights& w, int64_t n);
  // Unimplemented naming the op and type if the backend lacks an op this
  // model's weights need (so a missing op fails at load).
  Status CheckBackendSupport();
  // Final norm and output projection of the F32 rows `rows` (a view of x_ or h_);
  // copies the logits of the first n_read of them to host `logits`.
  Status OutputLogits(const Tensor& rows, int64_t n_read, float* logits);
  // Forward's ops, without the step graph around them.
  Status RunForward(const ForwardBatch& batch, KvCache& kv, bool batch_invariant, float* logits);

  Backend& backend_;
  HParams hp_;
  int64_t n_params_ = 0;
  GgmlType main_type_ = GgmlType::kF32;
  std::vector<std::unique_ptr<BackendBuffer>> buffers_;  // the weights
  Tensor tok_embd_, output_norm_, output_;
  std::vector<float> rope_freqs_;  // host memory (RopeParams::freq_factors)
  std::vector<LayerWeights> layers_;

  // Scratch activations for up to scratch_tokens_ tokens, in one buffer of the
  // backend. The pointers below are addresses in the backend's memory (device
  // addresses for CUDA): the model makes tensor views of them and moves bytes
  // only through scratch_->Write/Read, never by dereferencing them.
  int64_t scratch_tokens_ = 0;
  std::unique_ptr<BackendBuffer> scratch_;
  float* x_ = nullptr;
  float* h_ = nullptr;
  float* q_ = nullptr;
  float* k_ = nullptr;
  float* v_ = nullptr;
  float* attn_ = nullptr;
  float* gate_ = nullptr;
  float* up_ = nullptr;
  float* logits_ = nullptr;
  int64_t kept_logits_ = 0;  // rows of logits_ the last Forward kept
  std::vector<int32_t> positions_;
};

}  // namespace sinew::model
