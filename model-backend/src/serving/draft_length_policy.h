// DraftLengthPolicy: whether and how much the draft model (draft_model.h)
// should draft.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sinew::model {

// A sequence's use of the draft model, decided at its first decode.
enum class DraftUse : uint8_t {
  kUndecided,
  kOn,     // drafts while drafting pays
  kTrial,  // drafts at least one token a step, to measure
  kOff,    // never (again): its draft KV is released and not kept up
};

// The draft length k of a step is the one that maximises the expected tokens
// per unit of time, (1 + a + a^2 + ... + a^k) / (T + k * d), with a the
// measured chance that a drafted token is accepted (given the ones before it
// were), T the big model's decode step time and d the time of one draft round.
// When no length pays (a draft model barely cheaper than the model, or mostly
// wrong), sequences stop using the draft model for good: keeping its KV cache
// up with their tokens would cost a prefill of every token on the draft model.
// One new sequence in kTrialEvery still drafts, so that a change is noticed.
// Thread-safety: none.
class DraftLengthPolicy {
 public:
  static constexpr int32_t kTrialEvery = 8;

  // The use of a sequence that starts decoding now: kOn while drafting pays
  // (or before anything is measured), else kTrial for one in kTrialEvery and
  // kOff for the rest.
  DraftUse Admit(int32_t max_tokens);
  // The length for this step of a sequence of use `use` (kOn or kTrial), in
  // [0, max_tokens]: 0 for kOn when drafting does not pay (the sequence
  // should stop), at least 1 for kTrial.
  int32_t Length(int32_t max_tokens, DraftUse use) const;
  // A verification of `drafted` draft-model tokens of which the first
  // `accepted` were right.
  void ObserveVerification(int32_t drafted, int32_t accepted);
  // Seconds of one draft round that fed a few tokens per sequence, and of
  // one step of the big model that decoded.
  void ObserveDraftRound(double seconds);
  void ObserveModelStep(double seconds);

  double acceptance() const { return accepted_ / std::max(1.0, accepted_ + rejected_); }

 private:
  // The best length up to max_tokens (0: none pays).
  int32_t Best(int32_t max_tokens) const;

  // Exponentially decayed sums (the last few hundred tokens weigh most).
  static constexpr double kDecay = 0.98;
  double accepted_ = 3.0;  // a prior of 3 right drafts in 4
  double rejected_ = 1.0;
  double draft_round_s_ = 0.0;  // 0: not measured yet
  double model_step_s_ = 0.0;
  int32_t admitted_off_ = 0;  // sequences admitted while drafting did not pay
};

}  // namespace sinew::model
