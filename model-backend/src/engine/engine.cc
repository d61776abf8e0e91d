// Engine: loads a GGUF model onto a backend (EngineOptions::device) and runs generation.
#include "sinew/model/engine.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "kv_cache.h"
#include "model.h"
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

// Token ids of the vocabulary's end-of-generation tokens.
std::vector<int32_t> FindEogTokens(const GgufFile& f, int32_t n_vocab, int32_t eos) {
  std::vector<int32_t> ids;
  if (eos >= 0) ids.push_back(eos);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    auto v = f.GetInt(key);
    if (v.ok() && *v >= 0 && *v < n_vocab) ids.push_back(static_cast<int32_t>(*v));
  }
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (tokens.ok()) {
    for (size_t i = 0; i < tokens->size() && i < static_cast<size_t>(n_vocab); ++i) {
      const std::string_view t = (*tokens)[i];
      if (t == "<|eot_id|>" || t == "<|im_end|>" || t == "<|end|>" || t == "<|endoftext|>" ||
          t == "<|end_of_text|>" || t == "<end_of_turn>" || t == "<|eom_id|>") {
        ids.push_back(static_cast<int32_t>(i));
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

class EngineImpl final : public Engine {
 public:
  const ModelInfo& info() const override { return info_; }
  const GgufFile& gguf() const override { return *file_; }

  Result<GenerationResult> Generate(const std::vector<int32_t>& prompt,
                                    const SamplingParams& params,
                                    const std::function<bool(const GeneratedToken&)>& on_token)
      override;
  Result<std::vector<float>> Evaluate(const std::vector<int32_t>& tokens, bool all_logits) override;

  Status Init(const std::string& path, const EngineOptions& options);
  const Model& model() const { return *model_; }

 private:
  Status CheckPrompt(const std::vector<int32_t>& tokens) const;
  // Runs `tokens` from position pos0 in batches; logits of the last token (or all).
  Status Run(std::span<const int32_t> tokens, int32_t pos0, bool all_logits, float* logits);
  // One forward pass of `tokens` at positions pos0.. of the one sequence,
  // writing the logits of its last n_logits tokens to `logits`.
  Status Forward(std::span<const int32_t> tokens, int32_t pos0, int32_t n_logits, float* logits);

  // Constant after Init.
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  ModelInfo info_;
  int32_t n_batch_ = 256;

  std::mutex mutex_;  // one Generate/Evaluate at a time
  // Protected by mutex_.
  std::unique_ptr<KvCache> cache_;  // one block of n_ctx positions
  ForwardBatch batch_;
};

Status EngineImpl::Init(const std::string& path, const EngineOptions& options) {
  if (options.n_ctx < 0 || options.n_ctx > EngineOptions::kMaxContext) {
    return Status::InvalidArgument("n_ctx must be in [0, " +
                                   std::to_string(EngineOptions::kMaxContext) + "]");
  }
  if (options.n_batch < 1 || options.n_batch > 8192) {
    return Status::InvalidArgument("n_batch must be in [1, 8192]");
  }
  n_batch_ = options.n_batch;
  SINEW_ASSIGN_OR_RETURN(file_, GgufFile::Open(path));
  CpuBackendOptions backend_options;
  backend_options.n_threads = options.n_threads;
  backend_options.simd = options.simd;
  SINEW_ASSIGN_OR_RETURN(backend_, CreateBackendForDevice(options.device, backend_options));
  auto model = Model::Load(*file_, *backend_);
  if (!model.ok()) return model.status().WithContext(path);
  model_ = std::move(model).value();
  const HParams& hp = model_->hparams();

  info_.arch = hp.arch;
  info_.name = std::string(file_->GetStringOr("general.name", "").value_or(""));
  info_.n_ctx_train = hp.n_ctx_train;
  info_.n_ctx = options.n_ctx > 0 ? options.n_ctx
                                  : std::min(hp.n_ctx_train, EngineOptions::kDefaultMaxContext);
  info_.n_vocab = hp.n_vocab;
  info_.n_embd = hp.n_embd;
  info_.n_layer = hp.n_layer;
  info_.n_head = hp.n_head;
  info_.n_head_kv = hp.n_head_kv;
  info_.head_dim = hp.head_dim;
  info_.n_ff = hp.n_ff;
  info_.n_params = model_->n_params();
  auto token_id = [&](const char* key) -> int32_t {
    auto v = file_->GetInt(key);
    return v.ok() && *v >= 0 && *v < hp.n_vocab ? static_cast<int32_t>(*v) : -1;
  };
  info_.bos_id = token_id("tokenizer.ggml.bos_token_id");
  info_.eos_id = token_id("tokenizer.ggml.eos_token_id");
  info_.eog_ids = FindEogTokens(*file_, hp.n_vocab, info_.eos_id);
  const bool spm = file_->GetStringOr("tokenizer.ggml.model", "").value_or("") == "llama";
  auto add_bos = file_->GetBool("tokenizer.ggml.add_bos_token");
  info_.add_bos = info_.bos_id >= 0 && (add_bos.ok() ? *add_bos : spm);
  info_.weight_type = std::string(GgmlTypeName(model_->main_weight_type()));
  info_.simd = std::string(backend_->name());
  info_.device = backend_->device();
  info_.cache_type_k = std::string(GgmlTypeName(options.cache_type_k));
  info_.cache_type_v = std::string(GgmlTypeName(options.cache_type_v));
  info_.n_threads = options.n_threads > 0
                        ? options.n_threads
                        : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  auto cache = KvCache::Create(*backend_, hp.n_layer, /*n_blocks=*/1, info_.n_ctx,
                               int64_t{hp.n_head_kv} * hp.head_dim, options.cache_type_k,
                               options.cache_type_v);
  if (!cache.ok()) return cache.status().WithContext(path);
  cache_ = std::move(cache).value();
  return Status::Ok();
}

Status EngineImpl::CheckPrompt(const std::vector<int32_t>& tokens) const {
  if (tokens.empty()) return Status::InvalidArgument("the prompt has no tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= info_.n_vocab) {
      return Status::InvalidArgument("prompt token " + std::to_string(i) + " has id " +
                                     std::to_string(tokens[i]) + ", outside the vocabulary of " +
                                     std::to_string(info_.n_vocab));
    }
  }
  if (tokens.size() + 1 > static_cast<size_t>(info_.n_ctx)) {
    return Status::OutOfRange("the prompt has " + std::to_string(tokens.size()) +
                              " tokens; the context holds " + std::to_string(info_.n_ctx) +
                              " (prompt plus at least one new token)");
  }
  return Status::Ok();
}

Status EngineImpl::Forward(std::span<const int32_t> tokens, int32_t pos0, int32_t n_logits,
                           float* logits) {
  static constexpr int32_t kOneBlock[] = {0};
  batch_.tokens.assign(tokens.begin(), tokens.end());
  batch_.seqs.assign(1, ForwardSeq{static_cast<int32_t>(tokens.size()), pos0, kOneBlock, n_logits});
  return model_->Forward(batch_, *cache_, /*batch_invariant=*/false, logits);
}

Status EngineImpl::Run(std::span<const int32_t> tokens, int32_t pos0, bool all_logits,
                       float* logits) {
  const size_t n_vocab = static_cast<size_t>(info_.n_vocab);
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
  SINEW_RETURN_IF_ERROR(CheckPrompt(tokens));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<float> out((all_logits ? tokens.size() : 1) * static_cast<size_t>(info_.n_vocab));
  SINEW_RETURN_IF_ERROR(Run(tokens, 0, all_logits, out.data()));
  return out;
}

Result<GenerationResult> EngineImpl::Generate(
    const std::vector<int32_t>& prompt, const SamplingParams& params,
    const std::function<bool(const GeneratedToken&)>& on_token) {
  SINEW_RETURN_IF_ERROR(params.Validate());
  SINEW_RETURN_IF_ERROR(CheckPrompt(prompt));
  std::lock_guard<std::mutex> lock(mutex_);
  GenerationResult result;
  result.timings.prompt_tokens = static_cast<int32_t>(prompt.size());
  Sampler sampler(params);
  std::vector<int32_t> history = prompt;
  std::vector<float> logits(static_cast<size_t>(info_.n_vocab));

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
    if (params.stop_at_eos && std::binary_search(info_.eog_ids.begin(), info_.eog_ids.end(),
                                                 token.id)) {
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
    if (pos >= info_.n_ctx) {
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

const Model& ModelOf(const Engine& engine) {
  // EngineImpl is the one implementation of Engine.
  return static_cast<const EngineImpl&>(engine).model();
}

Result<std::unique_ptr<Engine>> Engine::Load(const std::string& gguf_path,
                                             const EngineOptions& options) {
  auto engine = std::make_unique<EngineImpl>();
  SINEW_RETURN_IF_ERROR(engine->Init(gguf_path, options));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace sinew::model
