// Sequence: one generation inside the ServingEngine — its tokens, its place in
// the paged KV cache, its sampler, and the tokens on their way to the caller.
//
// Thread-safety: the scheduler thread owns the KV fields; the outbox, done,
// finish, error and cancelled fields are guarded by the engine's mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <vector>

#include "block_manager.h"
#include "draft_length_policy.h"
#include "sinew/model/constraint.h"
#include "sinew/model/engine.h"
#include "sinew/model/sampling.h"
#include "sinew/status.h"

namespace sinew::model {

struct Sequence {
  Sequence(std::vector<int32_t> prompt, const SamplingParams& p,
           std::unique_ptr<TokenConstraint> c)
      : tokens(std::move(prompt)), params(p), sampler(p), constraint(std::move(c)) {}

  // Scheduler thread only.
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  SamplingParams params;
  Sampler sampler;
  std::unique_ptr<TokenConstraint> constraint;  // may be null
  int32_t n_generated = 0;
  int32_t n_computed = 0;       // positions whose KV is in the cache or queued
  BlockTable kv;                // its blocks in the paged KV cache
  bool preempted = false;       // set while planning a step
  // Swap preemption (kv_swap.h): while it waits to resume, the swap slots that
  // hold the KV of its first swapped_positions positions, one per block.
  std::vector<int32_t> swap_slots;
  int32_t swapped_positions = 0;
  std::vector<int32_t> draft;   // speculative tokens planned after the next one
  bool draft_from_model = false;  // `draft` came from the draft model (draft_model.h)
  // The draft model's KV cache of this sequence (draft_model.h): its blocks,
  // how many leading tokens it holds, and whether the sequence uses it.
  BlockTable draft_model_kv;
  int32_t draft_model_computed = 0;
  DraftUse draft_model_use = DraftUse::kUndecided;
  // Step overlap (ServingOptions::overlap_steps): while the step in flight
  // samples its next token on the device, tokens.back() is FedToken(fed_entry)
  // and n_computed already counts the positions that step computes; -1: none.
  int32_t fed_entry = -1;
  int32_t in_steps = 0;  // queued steps holding it that are not yet taken in
  int32_t queued = 0;    // of n_computed, the positions of those steps

  // Guarded by the engine's mutex.
  std::deque<GeneratedToken> outbox;
  bool done = false;
  FinishReason finish = FinishReason::kMaxTokens;
  Status error;
  std::condition_variable ready;
  std::atomic<bool> cancelled{false};
};

}  // namespace sinew::model
