// ServingEngine: many generations at once on one model — a paged KV cache,
// continuous batching with chunked prefill, and automatic prefix caching.
//
// Generate() has the contract of Engine::Generate() but may be called from many
// threads at once: each call becomes a sequence that a scheduler thread runs in
// a shared batch. Every step the scheduler gives each running sequence that is
// decoding one token, then spends what is left of the per-step token budget on
// prompt chunks (at most prefill_chunk tokens per sequence), then admits
// waiting sequences while the batch and the KV blocks allow. When blocks run
// out it preempts the most recently admitted sequence: its KV goes to the host
// swap space and comes back when it resumes, or its blocks are freed and it is
// recomputed then (the rule: ServingOptions::swap_space_mib). Outputs do not
// change either way.
//
// Prefix caching: full KV blocks are keyed by a hash of their whole token
// prefix; a new sequence starts from the longest cached prefix of its tokens,
// so an agent that re-sends its growing history pays only for the new tokens.
//
// Ownership: owns the model, the paged cache and the scheduler thread; the
// destructor fails generations still in flight with Unavailable and joins.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinew/model/constraint.h"
#include "sinew/model/engine.h"
#include "sinew/status.h"

namespace sinew::model {

struct ServingOptions {
  // Positions per KV block. Default: 16
  int32_t block_size = 16;
  // KV blocks in the cache; 0 sizes it by itself: on a GPU, what
  // gpu_memory_fraction leaves after the weights; on the CPU, 4 full contexts.
  // It must hold at least one full context (n_ctx / block_size, rounded up).
  // Default: 0
  int32_t n_blocks = 0;
  // On a GPU with n_blocks 0: the share of the device's memory that may be in
  // use once the KV cache is allocated. The cache gets the blocks that fit in
  // it once the model's weights are loaded; the rest is left for activations
  // and other processes. A draft
  // model's weights and KV cache (of as many blocks) come on top: with a large
  // draft model, set n_blocks. In (0, 1]. Default: 0.9
  double gpu_memory_fraction = 0.9;
  // Sequences in the running batch at most. Default: 32
  int32_t max_running = 32;
  // Generations waiting for admission at most; more get ResourceExhausted. Default: 256
  int32_t max_waiting = 256;
  // Tokens per forward step at most (decodes plus prompt chunks). Default: 512
  int32_t step_tokens = 512;
  // Prompt tokens of one sequence per step at most. Default: 256
  int32_t prefill_chunk = 256;
  // Reuse KV blocks of identical token prefixes. Default: true
  bool prefix_cache = true;
  // Host memory for the KV of preempted sequences, in MiB (src/serving/kv_swap.h;
  // page-locked on CUDA, allocated at load; on the CPU it costs memory only as
  // it is used). The rule when blocks run out: a preempted sequence with at
  // least one whole block of positions computed is swapped (its blocks copied
  // out, and back when it resumes) if the swap space has a slot for each of
  // its blocks; otherwise its blocks are freed and its positions recomputed
  // when it resumes, from the prefix cache as far as that still holds them.
  // Copying a block out and back costs far less than recomputing its
  // positions, so the rule swaps whenever there is room; less than one block
  // is one short chunk to recompute. On CUDA a swap queues one copy per layer,
  // K and V, of each block into page-locked memory and waits once.
  // Fractions of a MiB are allowed. 0: always recompute. Default: 1024
  double swap_space_mib = 1024;
  // Keep every token's outputs bit-identical to a single-request run whatever
  // else is batched. Backends whose ops compute each row alike whatever the
  // batch (BackendOps::RowInvariant: the CPU) need nothing for it; others get
  // every step's rows padded to a multiple of four (up to 3 extra rows). False
  // skips the padding there, and a token's logits may then differ in the last
  // bits with the batch. Default: true
  bool batch_invariant = true;
  // Prompt-lookup speculative decoding (src/serving/prompt_lookup.h): a decoding
  // sequence drafts up to this many tokens from an earlier occurrence of its last
  // tokens in its own context; the draft runs in the same forward as the next
  // token and every row is sampled as plain decoding would, so the output is
  // the same (bit-identical with batch_invariant), only sooner when drafts are
  // right. 0 disables. Default: 3
  int32_t speculative_draft_tokens = 3;
  // Drafts only take the rows up to the step's next group of four, which cost
  // next to nothing when drafts are wrong: where the backend pads (a step of T
  // tokens runs ceil(T / 4) * 4 rows) and where its matrix products load each
  // weight vector once per four rows (the CPU with AVX2 or AVX-512:
  // BackendOps::RowGroup). A lone decode gets 3 rows, two decodes 2, three 1,
  // four none; scalar CPU kernels none. False: any decode drafts, adding rows to
  // the step (pays when drafts are mostly right). Default: true
  bool speculative_free_rows_only = true;
  // Speculative decoding with a draft model (src/serving/draft_model.h): the
  // path of a smaller GGUF with the model's vocabulary. Decodes that prompt
  // lookup finds no draft for get up to speculative_draft_tokens greedy tokens
  // from it, within the same rows, verified the same way: outputs do not
  // change. Its KV cache has as many blocks as the model's (n_blocks) of the
  // cache types of EngineOptions. Empty: none. Default: ""
  std::string draft_model_path;
  // Draft with the draft model only as much as it pays by the measured
  // acceptance and times (src/serving/draft_length_policy.h). False: every
  // decode that prompt lookup leaves drafts speculative_draft_tokens tokens
  // with it. Default: true
  bool draft_model_adaptive = true;
  // Step graphs: steps of decodes only (one token per sequence, no drafts) of
  // up to 128 sequences are padded with dummy sequences to the next of 1, 2,
  // 4, ..., 128, so that every step of a bucket issues the same ops, and a
  // backend that CapturesSteps (CUDA) replays one captured graph per bucket
  // instead of launching every kernel. The dummies write their KV to one spare
  // block and their tokens are never sampled: outputs do not change. False, or
  // a backend that does not capture: no padding. Default: true
  bool step_graphs = true;
  // Pad decode steps to the buckets even where the backend does not capture
  // steps (to test the padding on the CPU). Default: false
  bool pad_decode_steps = false;
  // Sample with BackendOps::SampleRows, in one call per step, every row whose
  // request has no penalties and no top_logprobs (and, when constrained, no
  // draft to verify): the grammar mask goes to the backend as a bitmask, and
  // from a GPU only tokens come back, never the logits. The draw is the
  // sequence's own (its seed, on the host). False: every row's logits are read
  // back and sampled on the host. On the CPU both give the same tokens.
  // Default: true
  bool device_sampling = true;
  // Draft by prompt lookup (first, where it finds a match). False leaves the
  // drafting to the draft model alone. Default: true
  bool prompt_lookup = true;
  // Step overlap, where the backend queues its work (CUDA): while step N runs
  // on the device, the scheduler plans step N+1 and queues its forward, and
  // then takes step N's tokens in (outboxes, finishes, grammar state) while
  // step N+1 runs. Step N+1 reads the tokens step N sampled where the device
  // left them (FedToken ids), so it is planned ahead only when every token of
  // step N comes from SampleRows (device_sampling) with no draft to verify,
  // and its blocks are there without preempting anyone; otherwise that step
  // waits for step N as without overlap. A sequence that step N finishes was
  // planned into step N+1 already: its row there is computed and dropped, and
  // its blocks are freed after that step. Outputs do not change. Drafts need
  // the last token on the host: where speculation could draft (prompt lookup
  // or a draft model, with rows to draft in: speculative_free_rows_only and a
  // cheap row group above one, or free rows off), drafting wins and steps do
  // not overlap. False: every step waits for the last. Default: true
  bool overlap_steps = true;
  // Overlap steps even where the backend computes in the call (the CPU: then
  // nothing overlaps, to test the scheduler's side there). Default: false
  bool overlap_steps_always = false;
};

struct ServingStats {
  uint64_t prefix_hit_tokens = 0;   // prompt tokens whose KV came from the prefix cache
  uint64_t prefix_miss_tokens = 0;  // prompt tokens that had to be computed
  uint64_t preemptions = 0;         // swapped or recomputed
  uint64_t swap_outs = 0;           // preemptions that swapped the sequence's KV out
  uint64_t swap_in_tokens = 0;      // positions whose KV came back from the swap space
  uint64_t steps = 0;
  uint64_t step_tokens = 0;  // tokens run in all steps
  // Steps captured into graphs, run from a graph, and replays that did not
  // match their step and ran directly (BackendOps::step_graph_counts).
  uint64_t step_graph_captures = 0;
  uint64_t step_graph_replays = 0;
  uint64_t step_graph_misses = 0;
  // Where the step loop's time goes, in nanoseconds over all steps: planning
  // (admissions, preemption, drafts, the batch), the forward (on a GPU: the
  // time to queue it or fill its graph), sampling (on a GPU: the grammar masks
  // and draws, then the wait for the forward and the sampling kernel), and
  // taking the tokens in (outboxes, finishes, prefix-cache keys). Without step
  // overlap a GPU idles during planning, queueing and taking in; with it
  // (overlap_steps) the planning and taking in of overlapped steps run while it
  // works, and sampling includes the wait for the step's tokens.
  uint64_t plan_ns = 0;
  uint64_t forward_ns = 0;
  uint64_t sample_ns = 0;
  uint64_t absorb_ns = 0;
  // Steps planned and queued while the step before them ran (overlap_steps),
  // and rows they computed for sequences that the step before finished.
  uint64_t overlapped_steps = 0;
  uint64_t overlap_dropped_rows = 0;
  // Tokens sampled by BackendOps::SampleRows (device_sampling) and on the host.
  uint64_t backend_sampled_tokens = 0;
  uint64_t host_sampled_tokens = 0;
  // Speculative decoding: decodes that carried a draft, tokens drafted, drafted
  // tokens accepted, and tokens those decodes produced (accepted + 1 each, fewer
  // when the sequence ended). emitted / verifications is the speed-up in forward
  // passes over plain decoding for those decodes.
  uint64_t spec_verifications = 0;
  uint64_t spec_drafted_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  uint64_t spec_emitted_tokens = 0;
  // The draft model's share of spec_drafted_tokens and spec_accepted_tokens.
  uint64_t spec_model_drafted_tokens = 0;
  uint64_t spec_model_accepted_tokens = 0;
  // Tokens whose draft-model KV came from its own prefix cache.
  uint64_t spec_model_prefix_hit_tokens = 0;
  int32_t blocks_total = 0;
  int32_t blocks_available = 0;  // free or evictable
  int32_t swap_slots_total = 0;  // blocks the swap space holds
  int32_t swap_slots_used = 0;
  int32_t running = 0;
  int32_t waiting = 0;
};

class ServingEngine {
 public:
  // Errors: those of Engine::Load; InvalidArgument for bad options.
  [[nodiscard]] static Result<std::unique_ptr<ServingEngine>> Load(
      const std::string& gguf_path, const EngineOptions& engine_options,
      const ServingOptions& options);
  virtual ~ServingEngine() = default;

  virtual const ModelInfo& info() const = 0;
  virtual const GgufFile& gguf() const = 0;

  // As Engine::Generate(); on_token runs on the calling thread. Errors: those of
  // Engine::Generate(); ResourceExhausted when max_waiting generations already
  // wait; Unavailable when the engine shuts down first.
  [[nodiscard]] Result<GenerationResult> Generate(
      const std::vector<int32_t>& prompt_tokens, const SamplingParams& params,
      const std::function<bool(const GeneratedToken&)>& on_token) {
    return Generate(prompt_tokens, params, on_token, nullptr);
  }
  // The same with a constraint on the generated tokens (may be null): only tokens
  // it allows are sampled, and the generation ends (kStopToken) once the output is
  // complete and cannot go on. FailedPrecondition if the vocabulary cannot
  // continue the output (no token fits).
  [[nodiscard]] virtual Result<GenerationResult> Generate(
      const std::vector<int32_t>& prompt_tokens, const SamplingParams& params,
      const std::function<bool(const GeneratedToken&)>& on_token,
      std::unique_ptr<TokenConstraint> constraint) = 0;

  virtual ServingStats stats() const = 0;
};

}  // namespace sinew::model
