#include "scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "prompt_lookup.h"

namespace sinew::model {

Scheduler::Scheduler(Model& model, PagedKvStore& kv, const ServingOptions& options,
                     const ModelInfo& info, std::mutex& mutex, DraftModel* draft_model,
                     KvSwapSpace* swap)
    : model_(model),
      kv_(kv),
      draft_model_(draft_model),
      swap_(swap),
      options_(options),
      info_(info),
      mutex_(mutex),
      blocks_(options.n_blocks, kv.block_size(), options.prefix_cache) {
  // The store's blocks past the scheduler's are the padding's (serving_engine.cc).
  if (kv.n_blocks() > options.n_blocks) {
    pad_block_ = options.n_blocks;
    pad_table_ = {pad_block_};
  }
  UpdateGauges();  // /metrics shows the cache's size before the first step
}

bool Scheduler::EnsureBlocks(Sequence& seq, int32_t n_positions) {
  return blocks_.Ensure(seq.kv, n_positions);
}

void Scheduler::ReleaseBlocks(Sequence& seq) {
  blocks_.ReleaseAll(seq.kv);
  if (draft_model_ != nullptr) draft_model_->Release(seq);
  seq.n_computed = 0;
}

void Scheduler::Preempt(Sequence& seq) {
  const bool swapped = SwapOut(seq);
  ReleaseBlocks(seq);
  seq.preempted = true;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.preemptions;
  stats_.swap_outs += swapped ? 1 : 0;
}

bool Scheduler::SwapOut(Sequence& seq) {
  const int32_t bs = blocks_.block_size();
  if (swap_ == nullptr || seq.n_computed < bs) return false;  // recompute: at most one chunk
  DropSwap(seq);
  const auto n = static_cast<size_t>((seq.n_computed + bs - 1) / bs);
  if (n > static_cast<size_t>(swap_->available())) return false;
  if (!swap_->SwapOut(kv_, std::span<const int32_t>(seq.kv.blocks).first(n), seq.swap_slots).ok()) {
    return false;  // a failed copy: recompute instead
  }
  seq.swapped_positions = seq.n_computed;
  return true;
}

int32_t Scheduler::SwapIn(Sequence& seq, int32_t hit) {
  int32_t resume = hit;
  if (seq.swapped_positions > hit) {
    const int32_t bs = blocks_.block_size();
    const auto first = static_cast<size_t>(hit / bs);  // the prefix cache gives whole blocks
    const auto n = static_cast<size_t>((seq.swapped_positions + bs - 1) / bs) - first;
    if (swap_
            ->SwapIn(kv_, std::span<const int32_t>(seq.swap_slots).subspan(first, n),
                     std::span<const int32_t>(seq.kv.blocks).subspan(first, n))
            .ok()) {
      resume = seq.swapped_positions;
    }
  }
  DropSwap(seq);
  seq.n_computed = resume;
  return resume;
}

void Scheduler::DropSwap(Sequence& seq) {
  if (swap_ != nullptr) swap_->Release(seq.swap_slots);
  seq.swapped_positions = 0;
}

bool Scheduler::Reserve(const std::shared_ptr<Sequence>& seq, int32_t take,
                        const std::vector<Planned>& plan, bool ahead) {
  if (ahead) {
    // The step in flight still writes its sequences' blocks: preempt no one now.
    if (EnsureBlocks(*seq, seq->n_computed + take)) return true;
    ahead_refused_ = true;
    return false;
  }
  while (!EnsureBlocks(*seq, seq->n_computed + take)) {
    std::shared_ptr<Sequence> victim;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      Sequence* s = it->get();
      if (s == seq.get() || s->preempted) continue;
      const bool planned = std::any_of(plan.begin(), plan.end(),
                                       [s](const Planned& p) { return p.seq.get() == s; });
      if (!planned) {
        victim = *it;
        break;
      }
    }
    if (!victim) {
      Preempt(*seq);
      return false;
    }
    Preempt(*victim);
  }
  return true;
}

void Scheduler::MatchPrefix(Sequence& seq) {
  // At least the last token is computed: its logits pick the next token.
  const int32_t n = static_cast<int32_t>(seq.tokens.size());
  seq.n_computed = blocks_.MatchPrefix(seq.tokens, (n - 1) / blocks_.block_size(), seq.kv);
}

void Scheduler::RegisterFullBlocks(Sequence& seq) {
  // Only positions of steps taken in: a queued step may still fail.
  blocks_.RegisterFull(seq.tokens, seq.n_computed - seq.queued, seq.kv);
}

std::vector<Scheduler::Planned> Scheduler::Plan(bool ahead) {
  ahead_refused_ = false;
  // Drop cancelled sequences first (their callers have returned); those in the
  // step in flight once it is taken in.
  auto droppable = [](const std::shared_ptr<Sequence>& s) {
    return s->cancelled.load() && s->in_steps == 0;
  };
  for (auto& s : running_) {
    if (droppable(s)) ReleaseBlocks(*s);
  }
  std::erase_if(running_, droppable);
  for (auto& s : waiting_) {
    if (s->cancelled.load()) DropSwap(*s);
  }
  std::erase_if(waiting_, [](const auto& s) { return s->cancelled.load(); });

  std::vector<Planned> plan;
  int32_t budget = options_.step_tokens;
  for (auto& s : running_) s->draft.clear();
  // Pass 0: decodes (one token each); pass 1: prompt chunks.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      const std::shared_ptr<Sequence>& s = running_[i];
      if (s->preempted || s->cancelled.load()) continue;
      const int32_t need = static_cast<int32_t>(s->tokens.size()) - s->n_computed;
      const bool fed = s->fed_entry >= 0;
      // A fed token that is its last (max_tokens, the context) is not run.
      if (fed && (s->n_generated + 1 >= s->params.max_tokens || s->n_computed >= info_.n_ctx)) {
        continue;
      }
      const bool decode = (s->n_generated > 0 || fed) && need == 1;
      if (decode != (pass == 0)) continue;
      const int32_t take = std::min({need, options_.prefill_chunk, budget});
      if (!Reserve(s, take, plan, ahead)) {
        if (ahead_refused_) return {};
        continue;
      }
      plan.push_back({s, take});
      budget -= take;
    }
  }
  bool any_preempted = false;
  for (const auto& s : running_) any_preempted |= s->preempted;
  // Preempted sequences go back to the front of the queue, oldest first.
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->preempted) {
      (*it)->preempted = false;
      waiting_.push_front(*it);
    }
  }
  std::erase_if(running_, [this](const auto& s) {
    return std::find(waiting_.begin(), waiting_.end(), s) != waiting_.end();
  });
  // Admissions, while the batch, the budget and the blocks allow (keeping one
  // free block per running sequence so their decodes are not starved).
  while (!any_preempted && budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < options_.max_running) {
    std::shared_ptr<Sequence> s = waiting_.front();
    MatchPrefix(*s);
    s->draft.clear();
    const int32_t hit = s->n_computed;
    // Where it resumes: past its swapped-out KV, if the swap space holds more.
    const int32_t from = std::max(hit, s->swapped_positions);
    const int32_t need = static_cast<int32_t>(s->tokens.size()) - from;
    const int32_t take = std::min({need, options_.prefill_chunk, budget});
    if (!EnsureBlocks(*s, from + take) ||
        blocks_.available() < static_cast<int32_t>(running_.size())) {
      ReleaseBlocks(*s);
      if (running_.empty() && plan.empty() && !in_flight_) {
        // Nothing else holds blocks: only the prefix cache does; it is evictable,
        // so this cannot happen for a sequence that fits the cache.
        std::lock_guard<std::mutex> lock(mutex_);
        Finish(*s, FinishReason::kContextFull,
               Status::ResourceExhausted("the KV cache cannot hold this sequence"));
        waiting_.pop_front();
        continue;
      }
      break;
    }
    const int32_t resume = SwapIn(*s, hit);
    waiting_.pop_front();
    running_.push_back(s);
    // A failed swap-in recomputes from `hit`: the chunk grows, within the budget.
    const int32_t run =
        std::min({static_cast<int32_t>(s->tokens.size()) - resume, options_.prefill_chunk, budget});
    plan.push_back({s, run});
    budget -= run;
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.prefix_hit_tokens += static_cast<uint64_t>(hit);
    stats_.swap_in_tokens += static_cast<uint64_t>(resume - hit);
    stats_.prefix_miss_tokens += s->tokens.size() - static_cast<uint64_t>(resume);
  }
  AddDrafts(plan, budget);
  return plan;
}

void Scheduler::AddDrafts(std::vector<Planned>& plan, int32_t budget) {
  if (options_.speculative_draft_tokens <= 0) return;
  int32_t rows = budget;  // what the step may still take
  if (options_.speculative_free_rows_only) {
    // Only the rows up to the step's next group: padded anyway, or sharing the
    // weight loads of the step's own rows.
    int32_t n_tokens = 0;
    for (const Planned& p : plan) n_tokens += p.take;
    const int32_t group = model_.CheapRowGroup(options_.batch_invariant);
    rows = group > 1 ? std::min(rows, (n_tokens + group - 1) / group * group - n_tokens) : 0;
  }
  // Prompt lookup first: free, and right where an agent re-emits its context.
  // The decodes it finds nothing for ask the draft model, in one batch.
  std::vector<DraftModel::Request> requests;
  std::vector<Planned*> asking;
  for (Planned& p : plan) {
    if (rows <= 0) break;
    Sequence& s = *p.seq;
    const bool decode = s.n_generated > 0 && p.take == 1 &&
                        s.n_computed + 1 == static_cast<int32_t>(s.tokens.size());
    if (!decode || s.fed_entry >= 0) continue;  // a draft follows a token on the host
    // Drafted tokens must fit the rows, max_tokens and the context.
    const int32_t room = std::min({options_.speculative_draft_tokens, rows,
                                   s.params.max_tokens - s.n_generated - 1,
                                   info_.n_ctx - static_cast<int32_t>(s.tokens.size())});
    if (room <= 0) continue;
    std::vector<int32_t> draft;
    if (options_.prompt_lookup) draft = PromptLookupDraft(s.tokens, room);
    if (!draft.empty()) {
      const int32_t drafted = static_cast<int32_t>(draft.size());
      if (TakeDraft(p, std::move(draft), /*from_model=*/false)) rows -= drafted;
    } else if (const int32_t length = DraftModelLength(s, room); length > 0) {
      requests.push_back({&s, length});
      asking.push_back(&p);
      rows -= length;  // held for the draft model's tokens
    }
  }
  if (requests.empty()) return;
  std::vector<std::vector<int32_t>> drafts;
  if (!draft_model_->Draft(requests, &drafts).ok()) return;  // speculation only: go on without
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!drafts[i].empty()) TakeDraft(*asking[i], std::move(drafts[i]), /*from_model=*/true);
  }
}

int32_t Scheduler::DraftModelLength(Sequence& s, int32_t room) {
  if (draft_model_ == nullptr || s.draft_model_use == DraftUse::kOff) return 0;
  if (!options_.draft_model_adaptive) {
    s.draft_model_use = DraftUse::kOn;
    return room;
  }
  DraftLengthPolicy& policy = draft_model_->policy();
  if (s.draft_model_use == DraftUse::kUndecided) {
    s.draft_model_use = policy.Admit(options_.speculative_draft_tokens);
    if (s.draft_model_use == DraftUse::kOff) return 0;
  }
  const int32_t length = policy.Length(room, s.draft_model_use);
  if (length <= 0) {
    // Drafting stopped paying: stop keeping the draft KV up, for good.
    s.draft_model_use = DraftUse::kOff;
    draft_model_->Release(s);
  }
  return length;
}

bool Scheduler::TakeDraft(Planned& p, std::vector<int32_t> draft, bool from_model) {
  Sequence& s = *p.seq;
  const int32_t take = 1 + static_cast<int32_t>(draft.size());
  // Drafts never preempt anyone, nor eat the block reserve of running decodes.
  if (!EnsureBlocks(s, s.n_computed + take) ||
      blocks_.available() < static_cast<int32_t>(running_.size())) {
    return false;
  }
  s.draft = std::move(draft);
  s.draft_from_model = from_model;
  p.take = take;
  return true;
}

void Scheduler::Finish(Sequence& seq, FinishReason reason, const Status& error) {
  DropSwap(seq);
  seq.done = true;
  seq.finish = reason;
  seq.error = error;
  seq.ready.notify_all();
}

namespace {
const char kNoContinuation[] = "no token of the vocabulary continues the constrained output";
}  // namespace

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
  step.device_first.assign(plan.size(), -1);
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
                  [](const PagedSeq& s) { return s.n_tokens == 1 && s.n_logits == 1; });
  if (pad_block_ < 0 || !decodes_only || n == 0 || n > kLargestBucket) return;
  int32_t bucket = 1;
  while (bucket < n) bucket *= 2;
  for (int32_t i = n; i < bucket; ++i) {
    batch_.tokens.push_back(0);
    PagedSeq dummy;
    dummy.n_tokens = 1;
    dummy.pos0 = 0;
    dummy.block_table = pad_table_;
    dummy.n_logits = 1;
    batch_.seqs.push_back(dummy);
  }
  batch_.graph_key = static_cast<uint64_t>(bucket);
}

namespace {
using Clock = std::chrono::steady_clock;
uint64_t Nanos(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}
}  // namespace

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
    stats_.plan_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(planning).count());
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
  stats_.plan_ns +=
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(planning).count());
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
    PagedSeq ps;
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
  step.status = model_.ForwardPaged(batch_, kv_, options_.batch_invariant,
                                    host_logits ? logits_.data() : nullptr);
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

void Scheduler::UpdateGauges() {
  if (draft_model_ != nullptr) stats_.spec_model_prefix_hit_tokens = draft_model_->prefix_hit_tokens();
  stats_.blocks_total = blocks_.n_blocks();
  stats_.blocks_available = blocks_.available();
  stats_.swap_slots_total = swap_ != nullptr ? swap_->n_slots() : 0;
  stats_.swap_slots_used = swap_ != nullptr ? swap_->n_slots() - swap_->available() : 0;
  const BackendOps::StepGraphCounts graphs = model_.step_graph_counts();
  stats_.step_graph_captures = graphs.captures;
  stats_.step_graph_replays = graphs.replays;
  stats_.step_graph_misses = graphs.misses;
  stats_.running = static_cast<int32_t>(running_.size());
  stats_.waiting = static_cast<int32_t>(waiting_.size());
}

void Scheduler::FailAll(const Status& status) {
  // Nothing queued may still write the blocks freed below.
  (void)model_.Synchronize();
  for (std::optional<StepState>* step : {&in_flight_, &launched_}) {
    if (!*step) continue;
    for (const Planned& p : (*step)->plan) {
      p.seq->in_steps = 0;
      p.seq->queued = 0;
      if (!p.seq->done) Finish(*p.seq, FinishReason::kMaxTokens, status);
      ReleaseBlocks(*p.seq);
    }
    step->reset();
  }
  for (auto& s : running_) {
    Finish(*s, FinishReason::kMaxTokens, status);
    ReleaseBlocks(*s);
  }
  for (auto& s : waiting_) Finish(*s, FinishReason::kMaxTokens, status);
  running_.clear();
  waiting_.clear();
  UpdateGauges();
}

ServingStats Scheduler::stats() const { return stats_; }

}  // namespace sinew::model
