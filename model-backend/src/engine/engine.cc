// Engine: generation of one sequence at a time on a loaded model (model_loader.h),
// in a KV cache of one block of n_ctx positions.
#include "sinew/model/engine.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "kv_cache.h"
#include "model.h"
#include "model_loader.h"
#include "sinew/model/backend.h"

namespace sinew::model {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return "stop";
    case FinishReason::kMaxTokens: return "length";
    case FinishReason::kCallback: return "callback";
    case FinishReason::kContextFull: return "context_full";
  }
  return "unknown";
}

Result<GgmlType> ParseCacheType(std::string_view name) { return ParseKvType(name); }

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class EngineImpl final : public Engine {
 public:
  const ModelInfo& info() const override { return loaded_.info; }
  const GgufFile& gguf() const override { return *loaded_.file; }

  Result<GenerationResult> Generate(const std::vector<int32_t>& prompt,
                                    const SamplingParams& params,
                                    const std::function<bool(const GeneratedToken&)>& on_token)
      override;
  Result<std::vector<float>> Evaluate(const std::vector<int32_t>& tokens, bool all_logits) override;

  Status Init(const std::string& path, const EngineOptions& options);

 private:
  // Runs `tokens` from position pos0 in batches; logits of the last token (or all).
  Status Run(std::span<const int32_t> tokens, int32_t pos0, bool all_logits, float* logits);
  // One forward pass of `tokens` at positions pos0.. of the one sequence,
  // writing the logits of its last n_logits tokens to `logits`.
  Status Forward(std::span<const int32_t> tokens, int32_t pos0, int32_t n_logits, float* logits);

  // Constant after Init.
  LoadedModel loaded_;
  int32_t n_batch_ = 256;

  std::mutex mutex_;  // one Generate/Evaluate at a time
  // Protected by mutex_.
  std::unique_ptr<KvCache> cache_;  // one block of n_ctx positions
  ForwardBatch batch_;
};

Status EngineImpl::Init(const std::string& path, const EngineOptions& options) {
  SINEW_ASSIGN_OR_RETURN(loaded_, LoadModel(path, options));
  n_batch_ = options.n_batch;
  const HParams& hp = loaded_.model->hparams();
  auto cache = KvCache::Create(*loaded_.backend, hp.n_layer, /*n_blocks=*/1, info().n_ctx,
                               int64_t{hp.n_head_kv} * hp.head_dim, options.cache_type_k,
                               options.cache_type_v);
  if (!cache.ok()) return cache.status().WithContext(path);
  cache_ = std::move(cache).value();
  return Status::Ok();
}

Status EngineImpl::Forward(std::span<const int32_t> tokens, int32_t pos0, int32_t n_logits,
                           float* logits) {
  static constexpr int32_t kOneBlock[] = {0};
  batch_.tokens.assign(tokens.begin(), tokens.end());
  batch_.seqs.assign(1, ForwardSeq{static_cast<int32_t>(tokens.size()), pos0, kOneBlock, n_logits});
  return loaded_.model->Forward(batch_, *cache_, /*batch_invariant=*/false, logits);
}

Status EngineImpl::Run(std::span<const int32_t> tokens, int32_t pos0, bool all_logits,
                       float* logits) {
  const size_t n_vocab = static_cast<size_t>(info().n_vocab);
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(n_batch_)) {
    const size_t n = std::min(tokens.size() - start, static_cast<size_t>(n_batch_));
    const bool last_batch = start + n == tokens.size();
    // Intermediate batches only fill the cache, unless every token's logits are wanted.
    const int32_t n_logits = all_logits ? static_cast<int32_t>(n) : last_batch ? 1 : 0;
    float* dst = all_logits ? logits + start * n_vocab : logits;
    SINEW_RETURN_IF_ERROR(
        Forward(tokens.subspan(start, n), pos0 + static_cast<int32_t>(start), n_logits, dst));
  }
  return Status::Ok();
}

Result<std::vector<float>> EngineImpl::Evaluate(const std::vector<int32_t>& tokens,
                                                bool all_logits) {
  SINEW_RETURN_IF_ERROR(CheckPrompt(tokens, info()));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<float> out((all_logits ? tokens.size() : 1) * static_cast<size_t>(info().n_vocab));
  SINEW_RETURN_IF_ERROR(Run(tokens, 0, all_logits, out.data()));
  return out;
}

Result<GenerationResult> EngineImpl::Generate(
    const std::vector<int32_t>& prompt, const SamplingParams& params,
    const std::function<bool(const GeneratedToken&)>& on_token) {
  SINEW_RETURN_IF_ERROR(params.Validate());
  SINEW_RETURN_IF_ERROR(CheckPrompt(prompt, info()));
  std::lock_guard<std::mutex> lock(mutex_);
  GenerationResult result;
  result.timings.prompt_tokens = static_cast<int32_t>(prompt.size());
  Sampler sampler(params);
  std::vector<int32_t> history = prompt;
  std::vector<float> logits(static_cast<size_t>(info().n_vocab));

  auto start = Clock::now();
  SINEW_RETURN_IF_ERROR(Run(prompt, 0, false, logits.data()));
  int32_t pos = static_cast<int32_t>(prompt.size());
  Clock::time_point gen_start;
  for (;;) {
    GeneratedToken token;
    sampler.Sample(logits, history, &token);
    if (result.tokens.empty()) {
      result.timings.prompt_ms = MsSince(start);
      gen_start = Clock::now();
    }
    result.tokens.push_back(token);
    history.push_back(token.id);
    const bool keep_going = !on_token || on_token(token);
    if (params.stop_at_eos &&
        std::binary_search(info().eog_ids.begin(), info().eog_ids.end(), token.id)) {
      result.finish_reason = FinishReason::kStopToken;
      break;
    }
    if (!keep_going) {
      result.finish_reason = FinishReason::kCallback;
      break;
    }
    if (static_cast<int32_t>(result.tokens.size()) >= params.max_tokens) {
      result.finish_reason = FinishReason::kMaxTokens;
      break;
    }
    if (pos >= info().n_ctx) {
      result.finish_reason = FinishReason::kContextFull;
      break;
    }
    const int32_t id = token.id;
    SINEW_RETURN_IF_ERROR(Forward(std::span<const int32_t>(&id, 1), pos, 1, logits.data()));
    ++pos;
  }
  result.timings.generated_tokens = static_cast<int32_t>(result.tokens.size());
  result.timings.generation_ms = MsSince(gen_start);
  return result;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Load(const std::string& gguf_path,
                                             const EngineOptions& options) {
  auto engine = std::make_unique<EngineImpl>();
  SINEW_RETURN_IF_ERROR(engine->Init(gguf_path, options));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace sinew::model
