// ServingEngine: the API threads hand sequences to the scheduler thread and
// wait for their tokens.
#include "sinew/model/serving.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "draft_model.h"
#include "kv_cache.h"
#include "model.h"
#include "model_loader.h"
#include "scheduler.h"

namespace sinew::model {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class ServingEngineImpl final : public ServingEngine {
 public:
  ~ServingEngineImpl() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Status Init(const std::string& path, const EngineOptions& engine_options,
              const ServingOptions& options);

  const ModelInfo& info() const override { return loaded_.info; }
  const GgufFile& gguf() const override { return *loaded_.file; }
  ServingStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return scheduler_->stats();
  }

  using ServingEngine::Generate;
  Result<GenerationResult> Generate(const std::vector<int32_t>& prompt,
                                    const SamplingParams& params,
                                    const std::function<bool(const GeneratedToken&)>& on_token,
                                    std::unique_ptr<TokenConstraint> constraint) override;

 private:
  void Loop();
  // ServingOptions::n_blocks 0: what gpu_memory_fraction leaves on a device,
  // 4 contexts on the host. ResourceExhausted if a device holds not even one.
  Result<int32_t> DefaultKvBlocks(int32_t ctx_blocks, size_t block_bytes) const;

  LoadedModel loaded_;  // the file, backend and model; destroyed last
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<DraftModel> draft_model_;  // null without ServingOptions::draft_model_path
  std::unique_ptr<KvSwapSpace> swap_;        // null when ServingOptions::swap_space_mib is 0
  ServingOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Sequence>> incoming_;  // GUARDED_BY(mutex_)
  int32_t waiting_ = 0;                              // GUARDED_BY(mutex_): not yet admitted
  bool stopping_ = false;                            // GUARDED_BY(mutex_)
  std::unique_ptr<Scheduler> scheduler_;
  std::thread thread_;
};

Status ServingEngineImpl::Init(const std::string& path, const EngineOptions& engine_options,
                               const ServingOptions& options) {
  if (options.block_size < 1 || options.block_size > 4096 || options.n_blocks < 0 ||
      options.max_running < 1 || options.max_waiting < 0 || options.step_tokens < 1 ||
      options.prefill_chunk < 1 || options.speculative_draft_tokens < 0 ||
      options.speculative_draft_tokens > 64 ||
      !(options.swap_space_mib >= 0 && options.swap_space_mib <= 1 << 24) ||
      !(options.gpu_memory_fraction > 0 && options.gpu_memory_fraction <= 1)) {
    return Status::InvalidArgument(
        "serving options: block_size in [1, 4096], n_blocks >= 0, max_running >= 1, "
        "max_waiting >= 0, step_tokens >= 1, prefill_chunk >= 1, speculative_draft_tokens "
        "in [0, 64], swap_space_mib in [0, 2^24] and gpu_memory_fraction in (0, 1]");
  }
  options_ = options;
  SINEW_ASSIGN_OR_RETURN(loaded_, LoadModel(path, engine_options));
  const ModelInfo& mi = loaded_.info;
  const int32_t ctx_blocks = (mi.n_ctx + options.block_size - 1) / options.block_size;
  if (options_.n_blocks != 0 && options_.n_blocks < ctx_blocks) {
    return Status::InvalidArgument("serving options: " + std::to_string(options_.n_blocks) +
                                   " KV blocks cannot hold one context of " +
                                   std::to_string(mi.n_ctx) + " positions (" +
                                   std::to_string(ctx_blocks) + " blocks)");
  }
  Backend& backend = *loaded_.backend;
  // Batch invariance: a backend that can compute every row alike whatever the
  // batch does so (a GPU then leaves prompts off the tensor cores); one that
  // cannot has its rows padded (Model::PadsRows).
  if (options_.batch_invariant) backend.ops().MakeRowInvariant();
  const int64_t kv_dim = int64_t{mi.n_head_kv} * mi.head_dim;
  if (options_.n_blocks == 0) {
    SINEW_ASSIGN_OR_RETURN(
        options_.n_blocks,
        DefaultKvBlocks(ctx_blocks, KvCache::BlockBytes(mi.n_layer, options_.block_size, kv_dim,
                                                        engine_options.cache_type_k,
                                                        engine_options.cache_type_v)));
  }
  // One spare block for the dummies of padded decode steps (step graphs).
  const bool pads =
      options_.step_graphs && (loaded_.model->CapturesSteps() || options_.pad_decode_steps);
  SINEW_ASSIGN_OR_RETURN(
      kv_,
      KvCache::Create(backend, mi.n_layer, options_.n_blocks + (pads ? 1 : 0), options_.block_size,
                      kv_dim, engine_options.cache_type_k, engine_options.cache_type_v));
  if (options_.swap_space_mib > 0) {
    SINEW_ASSIGN_OR_RETURN(
        swap_, KvSwapSpace::Create(backend, *kv_,
                                   static_cast<size_t>(options_.swap_space_mib * (1 << 20))));
  }
  if (!options_.draft_model_path.empty()) {
    DraftModelOptions draft_options;
    draft_options.n_blocks = options_.n_blocks;
    draft_options.block_size = options_.block_size;
    draft_options.type_k = engine_options.cache_type_k;
    draft_options.type_v = engine_options.cache_type_v;
    draft_options.catch_up_tokens = options_.step_tokens;
    SINEW_ASSIGN_OR_RETURN(draft_model_, DraftModel::Load(options_.draft_model_path, *loaded_.file,
                                                          backend, draft_options));
  }
  scheduler_ = std::make_unique<Scheduler>(*loaded_.model, *kv_, options_, mi, mutex_,
                                           draft_model_.get(), swap_.get());
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

Result<int32_t> ServingEngineImpl::DefaultKvBlocks(int32_t ctx_blocks, size_t block_bytes) const {
  const std::optional<BackendMemory::DeviceMemoryInfo> mem =
      loaded_.backend->memory().DeviceBytes();
  if (!mem) return 4 * ctx_blocks;  // host memory, mapped: it costs only as it fills
  const int64_t fit = KvBlocksForDeviceMemory(*mem, options_.gpu_memory_fraction, block_bytes);
  if (fit < ctx_blocks) {
    return Status::ResourceExhausted(
        "the KV cache does not fit on " + loaded_.backend->device() + ": with " +
        std::to_string(mem->free_bytes) + " of " + std::to_string(mem->total_bytes) +
        " bytes free after the weights and gpu_memory_fraction " +
        std::to_string(options_.gpu_memory_fraction) + ", " + std::to_string(fit) + " blocks of " +
        std::to_string(block_bytes) + " bytes fit; one context needs " +
        std::to_string(ctx_blocks) + " (" +
        std::to_string(static_cast<uint64_t>(ctx_blocks) * block_bytes) + " bytes)");
  }
  return static_cast<int32_t>(std::min<int64_t>(fit, int64_t{1} << 30));
}

void ServingEngineImpl::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !incoming_.empty() || !scheduler_->idle(); });
      if (stopping_) {
        for (auto& s : incoming_) scheduler_->Enqueue(std::move(s));
        incoming_.clear();
        scheduler_->FailAll(Status::Unavailable("the model server is shutting down"));
        return;
      }
      for (auto& s : incoming_) scheduler_->Enqueue(std::move(s));
      incoming_.clear();
    }
    try {
      scheduler_->Step();
    } catch (const std::exception& error) {
      std::lock_guard<std::mutex> lock(mutex_);
      scheduler_->FailAll(Status::Internal(std::string("serving step failed: ") + error.what()));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_ = scheduler_->stats().waiting;
  }
}

Result<GenerationResult> ServingEngineImpl::Generate(
    const std::vector<int32_t>& prompt, const SamplingParams& params,
    const std::function<bool(const GeneratedToken&)>& on_token,
    std::unique_ptr<TokenConstraint> constraint) {
  SINEW_RETURN_IF_ERROR(params.Validate());
  SINEW_RETURN_IF_ERROR(CheckPrompt(prompt, loaded_.info));
  auto seq = std::make_shared<Sequence>(prompt, params, std::move(constraint));
  const auto start = Clock::now();
  GenerationResult result;
  result.timings.prompt_tokens = static_cast<int32_t>(prompt.size());
  Clock::time_point first_token;
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) return Status::Unavailable("the model server is shutting down");
  if (waiting_ + static_cast<int32_t>(incoming_.size()) >= options_.max_waiting) {
    return Status::ResourceExhausted("too many generations are waiting (" +
                                     std::to_string(options_.max_waiting) + "); retry later");
  }
  incoming_.push_back(seq);
  wake_.notify_one();
  for (;;) {
    seq->ready.wait(lock, [&] { return !seq->outbox.empty() || seq->done; });
    std::deque<GeneratedToken> tokens = std::move(seq->outbox);
    seq->outbox.clear();
    const bool done = seq->done;
    lock.unlock();
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (result.tokens.empty()) {
        result.timings.prompt_ms = MsSince(start);
        first_token = Clock::now();
      }
      result.tokens.push_back(tokens[i]);
      if (on_token && !on_token(tokens[i])) {
        seq->cancelled = true;
        const bool last = done && i + 1 == tokens.size();
        result.finish_reason =
            last && seq->finish == FinishReason::kStopToken ? FinishReason::kStopToken
                                                            : FinishReason::kCallback;
        lock.lock();
        wake_.notify_one();
        lock.unlock();
        break;
      }
    }
    if (seq->cancelled || done) {
      if (done && !seq->cancelled) {
        if (!seq->error.ok()) return seq->error;
        result.finish_reason = seq->finish;
      }
      break;
    }
    lock.lock();
  }
  result.timings.generated_tokens = static_cast<int32_t>(result.tokens.size());
  if (!result.tokens.empty()) result.timings.generation_ms = MsSince(first_token);
  return result;
}

}  // namespace

Result<std::unique_ptr<ServingEngine>> ServingEngine::Load(const std::string& gguf_path,
                                                           const EngineOptions& engine_options,
                                                           const ServingOptions& options) {
  auto engine = std::make_unique<ServingEngineImpl>();
  SINEW_RETURN_IF_ERROR(engine->Init(gguf_path, engine_options, options));
  return std::unique_ptr<ServingEngine>(std::move(engine));
}

}  // namespace sinew::model
