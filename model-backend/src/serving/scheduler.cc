#include "scheduler.h"

#include <algorithm>

#include "prompt_lookup.h"

namespace sinew::model {

Scheduler::Scheduler(Model& model, KvCache& kv, const ServingOptions& options,
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
  // step in flight once it is taken in. A caller may cancel at any moment, so
  // `cancelled` is read once per sequence: what is dropped is what is freed.
  std::erase_if(running_, [this](const std::shared_ptr<Sequence>& s) {
    if (!s->cancelled.load() || s->in_steps != 0) return false;
    ReleaseBlocks(*s);
    return true;
  });
  std::erase_if(waiting_, [this](const std::shared_ptr<Sequence>& s) {
    if (!s->cancelled.load()) return false;
    DropSwap(*s);
    return true;
  });

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
