#include "draft_model.h"

#include <algorithm>
#include <chrono>

namespace sinew::model {

Result<std::unique_ptr<DraftModel>> DraftModel::Load(const std::string& path,
                                                     const GgufFile& target, Backend& backend,
                                                     const DraftModelOptions& options) {
  if (options.n_blocks < 1 || options.block_size < 1 || options.catch_up_tokens < 1) {
    return Status::InvalidArgument(
        "draft model: n_blocks, block_size and catch_up_tokens must be at least 1");
  }
  SINEW_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  const char* const kTokens = "tokenizer.ggml.tokens";
  SINEW_ASSIGN_OR_RETURN(std::vector<std::string_view> want, target.GetStringArray(kTokens));
  auto have = file->GetStringArray(kTokens);
  if (!have.ok()) {
    return Status::InvalidArgument("draft model " + path + " has no vocabulary (" +
                                   std::string(kTokens) + "): " + have.status().message());
  }
  if (*have != want) {
    size_t first = 0;
    while (first < have->size() && first < want.size() && (*have)[first] == want[first]) ++first;
    return Status::InvalidArgument(
        "draft model " + path + " has another vocabulary than the model (" +
        std::to_string(have->size()) + " tokens against " + std::to_string(want.size()) +
        ", first difference at token " + std::to_string(first) +
        "): drafts must be in the model's token ids");
  }
  std::unique_ptr<DraftModel> draft(new DraftModel(std::move(file), options));
  SINEW_ASSIGN_OR_RETURN(draft->model_, Model::Load(*draft->file_, backend));
  const HParams& hp = draft->model_->hparams();
  draft->n_vocab_ = hp.n_vocab;
  SINEW_ASSIGN_OR_RETURN(
      draft->kv_,
      KvCache::Create(backend, hp.n_layer, options.n_blocks, options.block_size,
                      int64_t{hp.n_head_kv} * hp.head_dim, options.type_k, options.type_v));
  return draft;
}

void DraftModel::Release(Sequence& seq) {
  blocks_.ReleaseAll(seq.draft_model_kv);
  seq.draft_model_computed = 0;
}

Status DraftModel::Draft(std::span<const Request> requests,
                         std::vector<std::vector<int32_t>>* drafts) {
  drafts->assign(requests.size(), {});
  // Round 0 feeds each sequence what its draft KV lacks (ending with the token
  // just sampled) and drafts one token; round r feeds draft token r and drafts
  // the next. A sequence that cannot reach its end this step only catches up.
  std::vector<int32_t> goal(requests.size(), 0);  // tokens to draft this step
  int32_t rounds = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    Sequence& s = *requests[i].seq;
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    // The token sampled last is never fed yet (Truncate keeps it out), so each
    // sequence has at least one token to feed.
    if (s.draft_model_computed >= n) Release(s);
    if (s.draft_model_kv.blocks.empty()) {
      // A sequence new to the draft model starts from its longest cached prefix
      // (an agent's re-sent history), keeping its last token to feed.
      s.draft_model_computed =
          blocks_.MatchPrefix(s.tokens, (n - 1) / options_.block_size, s.draft_model_kv);
      prefix_hit_tokens_ += static_cast<uint64_t>(s.draft_model_computed);
    }
    goal[i] = n - s.draft_model_computed > options_.catch_up_tokens ? 0 : requests[i].max_tokens;
    // Positions the feeds write: up to n - 1 in round 0, then one per later round.
    const int32_t fed_to = goal[i] > 0
                               ? n + goal[i] - 1
                               : s.draft_model_computed + options_.catch_up_tokens;
    if (!blocks_.Ensure(s.draft_model_kv, fed_to)) {
      goal[i] = -1;  // no room: neither catch up nor draft
      continue;
    }
    rounds = std::max(rounds, std::max(goal[i], 1));
  }
  for (int32_t r = 0; r < rounds; ++r) {
    batch_.tokens.clear();
    batch_.seqs.clear();
    std::vector<size_t> fed;  // requests in this round's batch, in order
    for (size_t i = 0; i < requests.size(); ++i) {
      Sequence& s = *requests[i].seq;
      std::vector<int32_t>& d = (*drafts)[i];
      if (goal[i] < 0 || (r > 0 && static_cast<int32_t>(d.size()) != r) ||
          (r > 0 && r >= goal[i])) {
        continue;
      }
      ForwardSeq ps;
      ps.pos0 = s.draft_model_computed;
      if (r == 0) {
        const int32_t n = static_cast<int32_t>(s.tokens.size());
        const int32_t take = std::min(n - s.draft_model_computed, options_.catch_up_tokens);
        batch_.tokens.insert(batch_.tokens.end(), s.tokens.begin() + s.draft_model_computed,
                             s.tokens.begin() + s.draft_model_computed + take);
        ps.n_tokens = take;
        ps.n_logits = goal[i] > 0 ? 1 : 0;
      } else {
        batch_.tokens.push_back(d.back());
        ps.n_tokens = 1;
        ps.n_logits = 1;
      }
      ps.block_table = s.draft_model_kv.blocks;
      batch_.seqs.push_back(ps);
      fed.push_back(i);
    }
    if (fed.empty()) break;
    int64_t n_logits = 0;
    for (const ForwardSeq& ps : batch_.seqs) n_logits += ps.n_logits;
    logits_.resize(static_cast<size_t>(n_logits) * static_cast<size_t>(n_vocab_));
    const auto start = std::chrono::steady_clock::now();
    Status status = model_->Forward(batch_, *kv_, /*batch_invariant=*/false, logits_.data());
    // A round that feeds each sequence a token or a few (one row group of the
    // CPU's kernels) costs what a drafted token costs; round 0 after drafting
    // was off also catches up on the tokens since, which is not counted.
    const bool short_feeds = std::all_of(batch_.seqs.begin(), batch_.seqs.end(),
                                         [](const ForwardSeq& ps) { return ps.n_tokens <= 4; });
    if (short_feeds) {
      policy_.ObserveDraftRound(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!status.ok()) {
      // The draft KV written in this round may be partial: start those over.
      for (size_t i : fed) Release(*requests[i].seq);
      drafts->assign(requests.size(), {});
      return status;
    }
    size_t row = 0;
    for (size_t b = 0; b < fed.size(); ++b) {
      Sequence& s = *requests[fed[b]].seq;
      s.draft_model_computed += batch_.seqs[b].n_tokens;
      // Round 0 feeds only the sequence's own tokens: full blocks of them can
      // serve later sequences with the same prefix.
      if (r == 0) blocks_.RegisterFull(s.tokens, s.draft_model_computed, s.draft_model_kv);
      if (batch_.seqs[b].n_logits == 0) continue;
      const float* logits = logits_.data() + row * static_cast<size_t>(n_vocab_);
      ++row;
      const int32_t best =
          static_cast<int32_t>(std::max_element(logits, logits + n_vocab_) - logits);
      (*drafts)[fed[b]].push_back(best);
    }
  }
  return Status::Ok();
}

}  // namespace sinew::model
