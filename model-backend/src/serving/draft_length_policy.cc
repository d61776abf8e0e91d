#include "draft_length_policy.h"

namespace sinew::model {

int32_t DraftLengthPolicy::Best(int32_t max_tokens) const {
  if (max_tokens <= 0) return 0;
  if (draft_round_s_ <= 0.0 || model_step_s_ <= 0.0) return max_tokens;  // measure first
  const double a = acceptance();
  int32_t best = 0;
  double best_rate = 1.0 / model_step_s_;
  double expected = 1.0;  // tokens a step yields with k drafted
  double p = 1.0;
  for (int32_t k = 1; k <= max_tokens; ++k) {
    p *= a;
    expected += p;
    const double rate = expected / (model_step_s_ + k * draft_round_s_);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

DraftUse DraftLengthPolicy::Admit(int32_t max_tokens) {
  if (Best(max_tokens) > 0) return DraftUse::kOn;
  return admitted_off_++ % kTrialEvery == 0 ? DraftUse::kTrial : DraftUse::kOff;
}

int32_t DraftLengthPolicy::Length(int32_t max_tokens, DraftUse use) const {
  const int32_t best = Best(max_tokens);
  if (use == DraftUse::kTrial) return std::min(max_tokens, std::max(best, 1));
  return use == DraftUse::kOn ? best : 0;
}

void DraftLengthPolicy::ObserveVerification(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  accepted_ = accepted_ * kDecay + accepted;
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1.0 : 0.0);
}

void DraftLengthPolicy::ObserveDraftRound(double seconds) {
  draft_round_s_ = draft_round_s_ <= 0.0 ? seconds : 0.9 * draft_round_s_ + 0.1 * seconds;
}

void DraftLengthPolicy::ObserveModelStep(double seconds) {
  model_step_s_ = model_step_s_ <= 0.0 ? seconds : 0.9 * model_step_s_ + 0.1 * seconds;
}

}  // namespace sinew::model
