// DraftModel: speculative decoding with a second, smaller model over the same
// vocabulary. Each step it drafts a few tokens for the decoding sequences that
// prompt lookup (prompt_lookup.h) found nothing for, greedily and batched
// across those sequences; the scheduler verifies the drafts in the big model's
// forward as it verifies prompt-lookup drafts, so outputs never change: only
// how many tokens a forward of the big model yields.
//
// The draft model keeps its own paged KV cache, with a prefix cache of its own
// (so an agent's re-sent history is not fed again), and, in each Sequence, how
// many of its tokens that cache holds (draft_model_computed). A sequence's
// draft KV catches up lazily, in the step that next drafts for it; after
// verification the scheduler keeps only the positions whose tokens the
// sequence kept (Truncate). Whether a sequence drafts at all, and how much, is
// DraftLengthPolicy's call (draft_length_policy.h).
//
// Ownership: owns the draft GGUF file, its model and KV cache; the backend is
// the serving engine's and must outlive it. Thread-safety: none (the
// scheduler thread).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "block_manager.h"
#include "draft_length_policy.h"
#include "kv_cache.h"
#include "model.h"
#include "sequence.h"
#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model {

struct DraftModelOptions {
  // KV blocks of the draft model's cache and positions per block.
  int32_t n_blocks = 0;
  int32_t block_size = 16;
  GgmlType type_k = GgmlType::kF16;
  GgmlType type_v = GgmlType::kF16;
  // Tokens a sequence's draft KV catches up by in one step at most; a sequence
  // further behind catches up over several steps and drafts once it is level.
  int32_t catch_up_tokens = 512;
};

class DraftModel {
 public:
  // Loads the draft model at `path` onto `backend`. InvalidArgument when its
  // vocabulary (tokenizer.ggml.tokens) is not the target's, or for bad
  // options; the errors of GgufFile::Open, Model::Load and KvCache::Create.
  [[nodiscard]] static Result<std::unique_ptr<DraftModel>> Load(const std::string& path,
                                                                const GgufFile& target,
                                                                Backend& backend,
                                                                const DraftModelOptions& options);

  struct Request {
    Sequence* seq = nullptr;
    int32_t max_tokens = 0;  // >= 1
  };
  // Drafts up to max_tokens greedy tokens for each request (drafts[i] for
  // requests[i]), in as many batched forwards of the draft model as the longest
  // draft needs (plus catch-up). A draft is empty or short when the draft cache
  // has no blocks left or the sequence is still catching up. Errors: those of
  // the draft model's forward (the caller then drafts nothing).
  [[nodiscard]] Status Draft(std::span<const Request> requests,
                             std::vector<std::vector<int32_t>>* drafts);

  // The sequence now agrees with what the draft model was fed only in its
  // first `n_kept` tokens: later draft KV positions are stale.
  static void Truncate(Sequence& seq, int32_t n_kept) {
    seq.draft_model_computed = std::min(seq.draft_model_computed, n_kept);
  }
  // Frees the sequence's draft KV blocks (finished, cancelled or preempted).
  void Release(Sequence& seq);

  int32_t blocks_available() const { return blocks_.available(); }
  DraftLengthPolicy& policy() { return policy_; }
  // Tokens whose draft KV came from the draft model's prefix cache.
  uint64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  DraftModel(std::unique_ptr<GgufFile> file, const DraftModelOptions& options)
      : file_(std::move(file)), options_(options),
        blocks_(options.n_blocks, options.block_size, /*prefix_cache=*/true) {}

  std::unique_ptr<GgufFile> file_;
  DraftModelOptions options_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  BlockManager blocks_;
  int32_t n_vocab_ = 0;
  ForwardBatch batch_;
  std::vector<float> logits_;
  DraftLengthPolicy policy_;
  uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace sinew::model
