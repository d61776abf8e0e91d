// Engine: a loaded GGUF model that generates tokens.
//
// Load() maps the GGUF file, checks the architecture (llama, qwen2, qwen3) and
// every tensor's shape and type, and places the weights on a backend (the CPU
// backend uses the mapping in place; CUDA uploads them once). The Engine runs
// one sequence at a time in a KV cache of one block of n_ctx positions, through
// the same forward pass as the ServingEngine (sinew/model/serving.h), which
// runs many sequences at once in a paged cache; the Engine serves tests,
// benchmarks and single-request tools.
//
// Tokens in, tokens out: text belongs to the tokenizer (sinew/model/tokenizer.h).
// Generate() does not add BOS; the caller prepends info().bos_id when it
// wants one (info().add_bos says what the model's vocabulary asks for).
//
// Thread-safety: info() and gguf() may be called from any thread. Generate()
// and Evaluate() run one at a time per Engine (a second concurrent call waits
// for the first); the server serialises requests on one engine anyway.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/model/gguf.h"
#include "sinew/model/sampling.h"
#include "sinew/status.h"

namespace sinew::model {

struct EngineOptions {
  // Compute threads; 0 means one per online CPU. Default: 0
  int32_t n_threads = 0;
  // Context length (KV cache positions), at most kMaxContext; 0 means the
  // model's trained length capped at kDefaultMaxContext. The KV cache memory is
  // reserved up front but only touched as positions fill. Default: 0
  int32_t n_ctx = 0;
  // Prompt tokens per forward pass. Default: 256
  int32_t n_batch = 256;
  // Element types of the KV cache's keys and values: kF32, kF16 or kQ8_0
  // (its rows must then be a multiple of 32 values). F16 is half of F32's
  // memory and what llama.cpp and vLLM default to. Default: kF16, kF16
  GgmlType cache_type_k = GgmlType::kF16;
  GgmlType cache_type_v = GgmlType::kF16;
  // Where the model runs: "cpu", "cuda" (= "cuda:0") or "cuda:N". Asking for
  // CUDA in a build without it, or on a machine without that device, is a
  // load error. Default: "cpu"
  std::string device = "cpu";
  // SIMD level of the CPU backend: "auto", "avx512", "avx2" or "scalar".
  // "auto" picks the best the CPU supports. Default: "auto"
  std::string simd = "auto";

  static constexpr int32_t kDefaultMaxContext = 4096;
  static constexpr int32_t kMaxContext = 1 << 20;
};

// Parses a KV cache type name for EngineOptions: "f32", "f16" or "q8_0" (any
// case). InvalidArgument otherwise.
[[nodiscard]] Result<GgmlType> ParseCacheType(std::string_view name);

struct ModelInfo {
  std::string arch;  // "llama", "qwen2", "qwen3"
  std::string name;  // general.name, may be empty
  int32_t n_ctx_train = 0;
  int32_t n_ctx = 0;  // the engine's context length
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int64_t n_params = 0;
  int32_t bos_id = -1;  // -1: the vocabulary has none
  int32_t eos_id = -1;
  std::vector<int32_t> eog_ids;  // every token that ends a generation (eos, eot, ...)
  bool add_bos = false;          // tokenizer.ggml.add_bos_token (default true for llama/SPM)
  std::string weight_type;       // type of most weight bytes, e.g. "Q4_K"
  std::string simd;              // the backend in use, e.g. "cpu-avx512", "cuda-sm90"
  std::string device;            // "cpu" or "cuda:N"
  std::string cache_type_k;      // "F16", "F32" or "Q8_0"
  std::string cache_type_v;
  int32_t n_threads = 0;
};

enum class FinishReason {
  kStopToken,    // an end-of-generation token was produced (it is included in tokens)
  kMaxTokens,    // params.max_tokens reached
  kCallback,     // on_token returned false (the token it saw is included)
  kContextFull,  // no room left in the context
};
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", "callback", "context_full"

struct GenerationTimings {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prompt_ms = 0;      // prompt processing (time to first token, sampling included)
  double generation_ms = 0;  // the remaining tokens
};

struct GenerationResult {
  std::vector<GeneratedToken> tokens;
  FinishReason finish_reason = FinishReason::kMaxTokens;
  GenerationTimings timings;
};

class Engine {
 public:
  // Errors: those of GgufFile::Open; Unimplemented for an unsupported
  // architecture or tensor type; Corruption for a missing tensor or a shape
  // that disagrees with the metadata; InvalidArgument for bad options.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> Load(const std::string& gguf_path,
                                                            const EngineOptions& options);
  virtual ~Engine() = default;

  virtual const ModelInfo& info() const = 0;
  // The underlying file (metadata for the tokenizer and chat template).
  virtual const GgufFile& gguf() const = 0;

  // Generates up to params.max_tokens tokens after `prompt_tokens`, calling
  // on_token (may be empty) for each one as soon as it is sampled; returning
  // false stops the generation. Each call starts from an empty context.
  // Errors: InvalidArgument for an empty prompt, a token id outside the
  // vocabulary, or bad params; OutOfRange if the prompt does not fit in the
  // context (prompt length + 1 > n_ctx).
  [[nodiscard]] virtual Result<GenerationResult> Generate(
      const std::vector<int32_t>& prompt_tokens, const SamplingParams& params,
      const std::function<bool(const GeneratedToken&)>& on_token) = 0;

  // Runs the model over `tokens` from an empty context and returns the logits
  // (n_vocab floats per position, all positions if all_logits, else the last).
  // Same errors as Generate().
  [[nodiscard]] virtual Result<std::vector<float>> Evaluate(const std::vector<int32_t>& tokens,
                                                            bool all_logits) = 0;
};

}  // namespace sinew::model
