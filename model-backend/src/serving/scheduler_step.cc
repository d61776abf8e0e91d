// Scheduler, the running half: queueing a planned step (Launch), sampling
// it (QueueSample), taking it in (TakeIn, Absorb, Emit), and Step, which
// strings them together with step overlap. Planning is in scheduler.cc.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "scheduler.h"

namespace sinew::model {
namespace {

const char kNoContinuation[] = "no token of the vocabulary continues the constrained output";

using Clock = std::chrono::steady_clock;
uint64_t Nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}
uint64_t Nanos(Clock::time_point a, Clock::time_point b) { return Nanos(b - a); }

}  // namespace

void Scheduler::Finish(Sequence& seq, FinishReason reason, const Status& error) {
  DropSwap(seq);
  seq.done = true;
  seq.finish = reason;
  seq.error = error;
  seq.ready.notify_all();
}

bool Scheduler::SampleRow(Sequence& s, std::span<float> row) {
  if (s.constraint) {
    s.constraint->Mask(row);
    if (std::none_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); })) {
      Finish(s, FinishReason::kStopToken, Status::FailedPrecondition(kNoContinuation));
      return false;
    }
  }
  GeneratedToken token;
  s.sampler.Sample(row, s.tokens, &token);
  return Emit(s, token);
}

bool Scheduler::Emit(Sequence& s, const GeneratedToken& token) {
  if (s.constraint) s.constraint->Accept(token.id);
  if (s.fed_entry >= 0) {
    s.tokens.back() = token.id;  // in place of its FedToken
    s.fed_entry = -1;
  } else {
    s.tokens.push_back(token.id);
  }
  ++s.n_generated;
  s.outbox.push_back(token);
  s.ready.notify_all();
  if (s.params.stop_at_eos &&
      std::binary_search(info_.eog_ids.begin(), info_.eog_ids.end(), token.id)) {
    Finish(s, FinishReason::kStopToken, Status::Ok());
  } else if (s.constraint && s.constraint->Complete() && !s.constraint->CanContinue()) {
    Finish(s, FinishReason::kStopToken, Status::Ok());
  } else if (s.n_generated >= s.params.max_tokens) {
    Finish(s, FinishReason::kMaxTokens, Status::Ok());
  } else if (static_cast<int32_t>(s.tokens.size()) > info_.n_ctx) {
    // No position left for the token's KV.
    Finish(s, FinishReason::kContextFull, Status::Ok());
  }
  return !s.done;
}

bool Scheduler::SamplesOnDevice(const Sequence& s, int32_t n_logits) const {
  return options_.device_sampling && n_logits > 0 && s.sampler.SamplesOnDevice() &&
         (s.constraint == nullptr || n_logits == 1);
}

Status Scheduler::QueueSample(StepState& step) {
  const std::vector<Planned>& plan = step.plan;
  device_rows_.clear();
  device_masks_.clear();
  const int64_t n_vocab = info_.n_vocab;
  const int64_t words = MaskWords(n_vocab);
  // Rows sampled on the host are read back, each run of neighbours in one copy.
  int64_t run = -1;  // first row of the pending run, or -1
  auto read_run = [&](int64_t end) {
    const int64_t first = run;
    run = -1;
    return first < 0 ? Status::Ok()
                     : model_.ReadLogits(first, end - first, logits_.data() + first * n_vocab);
  };
  int64_t row = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *plan[i].seq;
    const int32_t n_logits = step.n_logits[i];
    if (n_logits == 0) continue;
    if (s.done) {  // the step before finished it: its rows are dropped
      SINEW_RETURN_IF_ERROR(read_run(row));
      row += n_logits;
      continue;
    }
    if (!SamplesOnDevice(s, n_logits)) {
      if (run < 0) run = row;
      row += n_logits;
      continue;
    }
    SINEW_RETURN_IF_ERROR(read_run(row));
    int32_t mask = -1;
    if (s.constraint) {
      // The constraint's mask of a row of zeros: the allowed tokens stay finite.
      mask_scratch_.assign(static_cast<size_t>(n_vocab), 0.0f);
      s.constraint->Mask(mask_scratch_);
      mask = static_cast<int32_t>(static_cast<int64_t>(device_masks_.size()) / words);
      device_masks_.resize(device_masks_.size() + static_cast<size_t>(words), 0u);
      uint32_t* bits = device_masks_.data() + static_cast<int64_t>(mask) * words;
      for (int64_t t = 0; t < n_vocab; ++t) {
        if (std::isfinite(mask_scratch_[static_cast<size_t>(t)])) bits[t / 32] |= 1u << (t % 32);
      }
    }
    const std::vector<double> draws = s.sampler.Draws(n_logits);
    step.device_first[i] = static_cast<int32_t>(device_rows_.size());
    for (int32_t r = 0; r < n_logits; ++r) {
      RowSampling rs = s.sampler.Row(draws.empty() ? 0.0 : draws[static_cast<size_t>(r)]);
      rs.row = static_cast<int32_t>(row + r);
      rs.mask = mask;
      device_rows_.push_back(rs);
    }
    row += n_logits;
  }
  SINEW_RETURN_IF_ERROR(read_run(row));
  step.n_sampled = device_rows_.size();
  return model_.QueueSampleLogits(device_rows_, device_masks_);
}

void Scheduler::PadToBucket() {
  constexpr int32_t kLargestBucket = 128;
  const int32_t n = static_cast<int32_t>(batch_.seqs.size());
  const bool decodes_only =
      std::all_of(batch_.seqs.begin(), batch_.seqs.end(),
                  [](const ForwardSeq& s) { return s.n_tokens == 1 && s.n_logits == 1; });
  if (pad_block_ < 0 || !decodes_only || n == 0 || n > kLargestBucket) return;
  int32_t bucket = 1;
  while (bucket < n) bucket *= 2;
  for (int32_t i = n; i < bucket; ++i) {
    batch_.tokens.push_back(0);
    ForwardSeq dummy;
    dummy.n_tokens = 1;
    dummy.pos0 = 0;
    dummy.block_table = pad_table_;
    dummy.n_logits = 1;
    batch_.seqs.push_back(dummy);
  }
  batch_.graph_key = static_cast<uint64_t>(bucket);
}

bool Scheduler::Overlaps() const {
  if (!options_.overlap_steps || !(model_.QueuesWork() || options_.overlap_steps_always)) {
    return false;
  }
  // Drafting needs the last token on the host: where it could draft, it wins.
  const bool drafts =
      options_.speculative_draft_tokens > 0 &&
      (options_.prompt_lookup || draft_model_ != nullptr) &&
      (!options_.speculative_free_rows_only || model_.CheapRowGroup(options_.batch_invariant) > 1);
  return !drafts;
}

void Scheduler::Step() {
  Clock::duration planning{};
  auto plan_step = [&](bool ahead) {
    const Clock::time_point t = Clock::now();
    std::vector<Planned> plan = Plan(ahead);
    planning += Clock::now() - t;
    return plan;
  };
  // Plan ahead while the step in flight runs, where its tokens can feed this one.
  const bool ahead = in_flight_.has_value() && in_flight_->feedable;
  if (in_flight_ && !ahead) TakeIn();
  std::vector<Planned> plan = plan_step(ahead);
  if (ahead && ahead_refused_) {
    // Blocks are short: preempting waits for the step in flight.
    TakeIn();
    plan = plan_step(false);
  }
  if (plan.empty()) {
    if (in_flight_) TakeIn();
    std::lock_guard<std::mutex> lock(mutex_);
    UpdateGauges();
    stats_.plan_ns += Nanos(planning);
    return;
  }
  const Clock::time_point start = Clock::now();
  // Held where FailAll finds it until it is in flight: an exception below must
  // not lose the sequences it holds.
  launched_ = Launch(std::move(plan));
  StepState& step = *launched_;
  const bool overlapped = in_flight_.has_value();
  const Clock::time_point launched = Clock::now();
  if (in_flight_) TakeIn();  // while this step's forward runs
  const Clock::time_point sampling = Clock::now();
  if (step.status.ok() && options_.device_sampling) step.status = QueueSample(step);
  step.feedable = step.status.ok() && Overlaps();
  for (size_t i = 0; i < step.plan.size() && step.feedable; ++i) {
    const int32_t n = step.n_logits[i];
    step.feedable = n == 0 || step.plan[i].seq->done || (n == 1 && step.device_first[i] >= 0);
  }
  if (step.feedable) {
    // The sampled tokens stay on the device for the next step; each sequence
    // holds the place of its token until the step is taken in.
    for (size_t i = 0; i < step.plan.size(); ++i) {
      Sequence& seq = *step.plan[i].seq;
      if (step.device_first[i] < 0 || seq.done) continue;
      seq.fed_entry = step.device_first[i];
      seq.tokens.push_back(FedToken(seq.fed_entry));
    }
  }
  const Clock::time_point queued = Clock::now();
  const bool decodes_only = std::all_of(step.plan.begin(), step.plan.end(), [](const Planned& p) {
    return p.seq->n_generated > 0 && p.take == 1 + static_cast<int32_t>(p.seq->draft.size());
  });
  in_flight_ = std::move(launched_);
  launched_.reset();
  if (!in_flight_->feedable) {
    if (TakeIn() && draft_model_ != nullptr && !overlapped && decodes_only) {
      // The draft length weighs draft rounds against the steps of decodes: the
      // forward and its sampling, when nothing overlapped them.
      draft_model_->policy().ObserveModelStep(
          std::chrono::duration<double>(sampled_at_ - start).count());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.plan_ns += Nanos(planning);
  stats_.forward_ns += Nanos(start, launched);
  stats_.sample_ns += Nanos(sampling, queued);
  stats_.overlapped_steps += overlapped ? 1 : 0;
}

Scheduler::StepState Scheduler::Launch(std::vector<Planned> plan) {
  StepState step;
  step.plan = std::move(plan);
  batch_.tokens.clear();
  batch_.seqs.clear();
  batch_.graph_key = 0;
  int32_t n_out = 0;
  for (const Planned& p : step.plan) {
    Sequence& s = *p.seq;
    const int32_t real = p.take - static_cast<int32_t>(s.draft.size());
    batch_.tokens.insert(batch_.tokens.end(), s.tokens.begin() + s.n_computed,
                         s.tokens.begin() + s.n_computed + real);
    batch_.tokens.insert(batch_.tokens.end(), s.draft.begin(), s.draft.end());
    ForwardSeq ps;
    ps.n_tokens = p.take;
    ps.pos0 = s.n_computed;
    ps.block_table = s.kv.blocks;
    const bool reaches_end = s.n_computed + real == static_cast<int32_t>(s.tokens.size());
    ps.n_logits = reaches_end ? 1 + static_cast<int32_t>(s.draft.size()) : 0;
    n_out += ps.n_logits;
    batch_.seqs.push_back(ps);
    step.n_logits.push_back(ps.n_logits);
    // Its real tokens' KV is computed from now on (accepted drafts add theirs
    // when the step is taken in).
    s.n_computed += real;
    s.queued += real;
    ++s.in_steps;
    step.real.push_back(real);
  }
  step.device_first.assign(step.plan.size(), -1);
  PadToBucket();
  step.n_tokens = batch_.tokens.size();                                  // the dummies' too
  n_out += static_cast<int32_t>(batch_.seqs.size() - step.plan.size());  // the dummies' rows
  const bool host_logits = !options_.device_sampling;
  logits_.resize(static_cast<size_t>(n_out) * static_cast<size_t>(info_.n_vocab));
  step.status =
      model_.Forward(batch_, kv_, options_.batch_invariant, host_logits ? logits_.data() : nullptr);
  return step;
}

bool Scheduler::TakeIn() {
  const Clock::time_point waiting = Clock::now();
  StepState step = std::move(*in_flight_);
  in_flight_.reset();
  device_tokens_.assign(step.n_sampled, SampledToken{});
  if (step.status.ok() && options_.device_sampling) {
    step.status = model_.TakeSampled(device_tokens_);
  }
  const Clock::time_point absorbing = Clock::now();
  sampled_at_ = absorbing;
  std::lock_guard<std::mutex> lock(mutex_);
  Absorb(step);
  stats_.sample_ns += Nanos(waiting, absorbing);
  stats_.absorb_ns += Nanos(absorbing, Clock::now());
  return step.status.ok();
}

void Scheduler::Absorb(const StepState& step) {
  const std::vector<Planned>& plan = step.plan;
  const Status& status = step.status;
  ++stats_.steps;
  stats_.step_tokens += step.n_tokens;
  size_t out = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *plan[i].seq;
    --s.in_steps;
    s.queued -= step.real[i];
    const int32_t n_logits = step.n_logits[i];
    const size_t first_row = out;
    out += static_cast<size_t>(n_logits);
    if (s.done) {  // finished by the step before: this step's rows are dropped
      stats_.overlap_dropped_rows += static_cast<uint64_t>(n_logits);
      continue;
    }
    if (!status.ok()) {
      s.draft.clear();
      Finish(s, FinishReason::kMaxTokens, status);
      continue;
    }
    // Row r holds the logits after the real tokens and the first r drafted ones:
    // sample it exactly as plain decoding would; go on to row r + 1 only while
    // the sampled token equals the drafted one (then that row's input was right).
    const int32_t n_draft = static_cast<int32_t>(s.draft.size());
    const int32_t generated_before = s.n_generated;
    const int32_t tokens_before =
        static_cast<int32_t>(s.tokens.size()) - (s.fed_entry >= 0 ? 1 : 0);
    int32_t accepted = 0;
    for (int32_t r = 0; r < n_logits; ++r) {
      const int32_t before = s.n_generated;
      bool more = false;
      if (step.device_first[i] >= 0) {
        const SampledToken& t = device_tokens_[static_cast<size_t>(step.device_first[i] + r)];
        if (t.id < 0) {
          Finish(s, FinishReason::kStopToken, Status::FailedPrecondition(kNoContinuation));
        } else {
          s.sampler.Took(t.id);
          ++stats_.backend_sampled_tokens;
          GeneratedToken token;
          token.id = t.id;
          token.logprob = t.logprob;
          more = Emit(s, token);
        }
      } else {
        const std::span<float> row(logits_.data() + (first_row + static_cast<size_t>(r)) *
                                                        static_cast<size_t>(info_.n_vocab),
                                   static_cast<size_t>(info_.n_vocab));
        ++stats_.host_sampled_tokens;
        more = SampleRow(s, row);
      }
      const bool matched = s.n_generated > before && r < n_draft &&
                           s.tokens.back() == s.draft[static_cast<size_t>(r)];
      accepted += matched ? 1 : 0;
      if (!more || !matched) break;
      ++s.n_computed;  // the drafted token's KV, written in this step, is right
    }
    if (n_draft > 0 && n_logits > 0) {
      ++stats_.spec_verifications;
      stats_.spec_drafted_tokens += static_cast<uint64_t>(n_draft);
      stats_.spec_accepted_tokens += static_cast<uint64_t>(accepted);
      stats_.spec_emitted_tokens += static_cast<uint64_t>(s.n_generated - generated_before);
      if (s.draft_from_model) {
        stats_.spec_model_drafted_tokens += static_cast<uint64_t>(n_draft);
        stats_.spec_model_accepted_tokens += static_cast<uint64_t>(accepted);
        draft_model_->policy().ObserveVerification(n_draft, accepted);
      }
    }
    // The draft model was fed its drafted tokens; only the accepted ones stay.
    DraftModel::Truncate(s, tokens_before + accepted);
    s.draft.clear();
    RegisterFullBlocks(s);
  }
  for (const Planned& p : plan) {
    // Blocks a queued step still writes are freed once it is taken in.
    if (p.seq->done && p.seq->in_steps == 0) ReleaseBlocks(*p.seq);
  }
  std::erase_if(running_, [](const auto& s) { return s->done; });
  UpdateGauges();
}

}  // namespace sinew::model
