// Scheduler: continuous batching over the paged KV cache. Plans a step
// (decodes first, then prompt chunks, then admissions, preempting by swap or
// recompute when blocks run out), runs it through Model::Forward,
// samples, and hands tokens to the sequences' outboxes. With step overlap
// (ServingOptions::overlap_steps) at most one step is in flight between calls
// of Step(): each call plans and queues the next step, then takes the one in
// flight in while the device runs the new one.
//
// Thread-safety: Step() runs on the serving engine's scheduler thread only; it
// takes `mutex` to deliver tokens and to read new arrivals.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "block_manager.h"
#include "draft_model.h"
#include "kv_cache.h"
#include "kv_swap.h"
#include "model.h"
#include "sequence.h"
#include "sinew/model/serving.h"

namespace sinew::model {

class Scheduler {
 public:
  // `draft_model` may be null (no draft-model speculation), and so may `swap`
  // (preemption always recomputes).
  Scheduler(Model& model, KvCache& kv, const ServingOptions& options, const ModelInfo& info,
            std::mutex& mutex, DraftModel* draft_model = nullptr, KvSwapSpace* swap = nullptr);

  // Adds a sequence to the waiting queue. Scheduler thread only.
  void Enqueue(std::shared_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }
  bool idle() const { return running_.empty() && waiting_.empty() && !in_flight_; }
  // Runs one step (queues one, and takes in the one before it, with overlap).
  // REQUIRES: !idle(). `mutex` is not held by the caller.
  void Step();
  // Fails every sequence with `status` (shutdown). `mutex` is held by the caller.
  void FailAll(const Status& status);
  // Counters and gauges as of the last step; `mutex` is held by the caller.
  ServingStats stats() const;

 private:
  struct Planned {
    std::shared_ptr<Sequence> seq;
    int32_t take = 0;
  };
  // A queued step until it is taken in: its plan, each entry's logits rows and
  // first QueueSampleLogits entry (-1: sampled on the host, from logits_),
  // and whether its tokens can feed the next step on the device.
  struct StepState {
    std::vector<Planned> plan;
    std::vector<int32_t> n_logits;
    std::vector<int32_t> device_first;
    std::vector<int32_t> real;  // each entry's positions counted at launch (drafts aside)
    size_t n_tokens = 0;        // tokens run (padding included), for the counters
    size_t n_sampled = 0;       // QueueSampleLogits entries
    Status status;
    bool feedable = false;
  };
  // Whether steps overlap at all (ServingOptions::overlap_steps's rule).
  bool Overlaps() const;
  bool EnsureBlocks(Sequence& seq, int32_t n_positions);
  // Makes room for `seq` to run `take` more tokens, preempting later running
  // sequences not already planned; false if `seq` itself had to be preempted.
  // Planning `ahead` (a step in flight), it preempts no one: false, with
  // ahead_refused_ set, when the blocks are not there.
  bool Reserve(const std::shared_ptr<Sequence>& seq, int32_t take, const std::vector<Planned>& plan,
               bool ahead);
  // Frees the blocks of `seq` and sends it back to wait, its KV swapped out
  // first where ServingOptions::swap_space_mib's rule says so.
  void Preempt(Sequence& seq);
  // Swaps the KV of `seq` out (the rule's other half: room for every block);
  // false, with nothing taken, where it recomputes instead.
  bool SwapOut(Sequence& seq);
  // Admission of a sequence whose first `hit` positions came from the prefix
  // cache: brings back what the swap space holds beyond them, into the blocks
  // it already has, and frees its slots. Returns the positions it resumes
  // from (hit when nothing comes back, or the copy failed: then recompute).
  int32_t SwapIn(Sequence& seq, int32_t hit);
  // Frees the swap slots of a sequence that will not resume (finished,
  // cancelled, failed).
  void DropSwap(Sequence& seq);
  void ReleaseBlocks(Sequence& seq);
  void MatchPrefix(Sequence& seq);
  void RegisterFullBlocks(Sequence& seq);
  // The next step. `ahead`: while the step in flight runs (its sequences that
  // sample a token on the device run their next decode from FedToken ids;
  // none is preempted: an empty plan with ahead_refused_ set when one would be).
  std::vector<Planned> Plan(bool ahead);
  // Speculative decoding: gives planned decodes a prompt-lookup draft, or else
  // one from the draft model, within `budget` more tokens and, with
  // speculative_free_rows_only, within the rows up to the step's next group
  // (Model::CheapRowGroup). Allocates the drafts' blocks.
  void AddDrafts(std::vector<Planned>& plan, int32_t budget);
  // The draft model's draft length for decode `s` this step, within `room`
  // (0: none). Decides the sequence's use of the draft model at its first
  // decode, and releases its draft KV when drafting stops paying.
  int32_t DraftModelLength(Sequence& s, int32_t room);
  // Makes `draft` the draft of planned decode `p` if its blocks can be had
  // without preempting anyone; false if not.
  bool TakeDraft(Planned& p, std::vector<int32_t> draft, bool from_model);
  // Samples the next token of `seq` from its logits `row` on the host (mutex
  // held): the constraint's mask, the sampler, then Emit. False if `seq` is
  // done (finished or failed) after it.
  bool SampleRow(Sequence& seq, std::span<float> row);
  // The rest of one decode once its token is chosen (mutex held): the
  // constraint, the tokens, the outbox and the finish checks. False if `seq`
  // is done after it.
  bool Emit(Sequence& seq, const GeneratedToken& token);
  // Builds batch_ from `plan` and queues its forward: its sequences' n_computed
  // count the positions it computes from now on.
  StepState Launch(std::vector<Planned> plan);
  // Waits for the tokens of the step in flight and takes them in (mutex
  // taken); whether that step succeeded.
  bool TakeIn();
  // Takes in the results of `step` (mutex held): its tokens (sampled by the
  // backend or here), speculative acceptance, finishes, new prefix-cache keys,
  // freed blocks; on a failed step, fails its sequences. Sequences a step
  // before it finished are skipped (their rows dropped).
  void Absorb(const StepState& step);
  // Pads a decode-only batch_ of at most 128 sequences with dummy sequences to
  // the next power of two and gives it that bucket as its graph key
  // (ServingOptions::step_graphs). The dummies come last: no plan entry reads
  // their logits.
  void PadToBucket();
  // Whether this step samples `seq`'s n_logits rows with SampleRows.
  bool SamplesOnDevice(const Sequence& seq, int32_t n_logits) const;
  // After `step`'s forward that kept its logits: queues the sampling of the
  // rows of the sequences that SamplesOnDevice in one QueueSampleLogits call
  // (entries from step.device_first[i] for plan entry i; -1 for the others)
  // and reads the other rows back into logits_. A constrained sequence whose
  // mask allows nothing gets id -1. Sequences already done are skipped.
  Status QueueSample(StepState& step);
  // Marks `seq` done (mutex held) and frees its blocks.
  void Finish(Sequence& seq, FinishReason reason, const Status& error);
  // Copies the gauges into stats_ (mutex held).
  void UpdateGauges();

  Model& model_;
  KvCache& kv_;
  DraftModel* draft_model_;  // may be null
  KvSwapSpace* swap_;        // may be null
  const ServingOptions options_;
  const ModelInfo& info_;
  std::mutex& mutex_;
  BlockManager blocks_;
  std::vector<std::shared_ptr<Sequence>> running_;  // admission order
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::vector<float> logits_;
  // QueueSample's rows and masks, and the tokens TakeIn takes.
  std::vector<RowSampling> device_rows_;
  std::vector<uint32_t> device_masks_;
  std::vector<SampledToken> device_tokens_;
  std::vector<float> mask_scratch_;
  ForwardBatch batch_;
  std::optional<StepState> in_flight_;  // the step queued and not yet taken in
  std::optional<StepState> launched_;   // the next one, while Step() prepares it
  std::chrono::steady_clock::time_point sampled_at_;  // when TakeIn last had its tokens
  bool ahead_refused_ = false;          // the last Plan(ahead) would have preempted
  // The spare KV block the dummies of a padded step write to (-1: no padding),
  // and the one-block table they share.
  int32_t pad_block_ = -1;
  std::vector<int32_t> pad_table_;
  // Counters, written by the scheduler thread under mutex_.
  ServingStats stats_;
};

}  // namespace sinew::model
