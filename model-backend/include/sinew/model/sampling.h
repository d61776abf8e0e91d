// Sampling: turns a row of logits into the next token.
//
// Order of the transforms (each one optional): repetition penalty over the
// last `repetition_last_n` tokens -> frequency and presence penalties (OpenAI:
// logit[j] -= frequency_penalty * c[j] + presence_penalty * (c[j] > 0), where
// c[j] counts token j among the tokens this Sampler has returned, i.e. the
// generated tokens, not the prompt) -> greedy (argmax) if `greedy` or
// temperature <= 0 -> top-k -> temperature -> softmax -> top-p -> min-p ->
// draw with a generator seeded by `seed` (same seed, same logits: same token).
// Log-probabilities reported to callers are those of the model itself: a log
// softmax of the raw logits, before any of the transforms above.
//
// Stop strings are text-level and handled by the caller (the server stops a
// generation through the token callback); the engine stops on the model's
// end-of-generation tokens, max_tokens, the callback, or a full context.
//
// Thread-safety: SamplingParams is a value. A Sampler holds a random generator
// and must be used from one thread at a time.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model {

struct SamplingParams {
  // Always take the most likely token. Default: false.
  bool greedy = false;
  // Softmax temperature; <= 0 means greedy. Default: 1.0
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 disables. Default: 0
  int32_t top_k = 0;
  // Keep the smallest set of tokens whose probability reaches top_p; 1 disables. Default: 1.0
  float top_p = 1.0f;
  // Drop tokens with probability below min_p times the top token's; 0 disables. Default: 0
  float min_p = 0.0f;
  // Divide positive (multiply negative) logits of recently seen tokens; 1 disables. Default: 1.0
  float repetition_penalty = 1.0f;
  // How many recent tokens (prompt included) the penalty looks at; -1 means all. Default: 64
  int32_t repetition_last_n = 64;
  // Subtracted from a logit once per earlier occurrence of the token in the
  // generated text (OpenAI semantics), in [-2, 2]; 0 disables. Default: 0
  float frequency_penalty = 0.0f;
  // Subtracted from a logit if the token occurs in the generated text at all, in
  // [-2, 2]; 0 disables. Default: 0
  float presence_penalty = 0.0f;
  // Seed of the random generator. Default: 0
  uint64_t seed = 0;
  // Maximum number of new tokens. REQUIRES: >= 1. Default: 16
  int32_t max_tokens = 16;
  // Number of most likely alternatives (with log-probabilities) to report per
  // token, 0..20. Default: 0
  int32_t logprobs = 0;
  // Stop at the model's end-of-generation tokens. Default: true
  bool stop_at_eos = true;

  // InvalidArgument naming the first bad field.
  [[nodiscard]] Status Validate() const;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0.0f;                  // of `id` under the model's distribution
  std::vector<TokenLogprob> top_logprobs;  // params.logprobs entries, most likely first
};

// log(sum(exp(logits))), as the sampler computes it for log-probabilities: the
// largest logit plus the log of a double sum of exp(logit - largest).
float LogSumExp(std::span<const float> logits);

// The token that `row` (backend.h: RowSampling) picks from `logits`, which
// already carry the sampler's penalties and the mask (-infinity): the host
// definition of BackendOps::SampleRows. Sampler::Sample picks its tokens with
// it; the CPU backend runs it; a device kernel follows it. `candidates` is
// scratch, reused between calls.
int32_t ChooseToken(std::span<const float> logits, const RowSampling& row,
                    std::vector<std::pair<float, int32_t>>& candidates);

class Sampler {
 public:
  // REQUIRES: params.Validate().ok().
  explicit Sampler(const SamplingParams& params);

  // Picks the next token from `logits` (modified in place as scratch) given the
  // tokens seen so far (prompt and generated), and fills `out`. The returned
  // token counts as generated for the frequency and presence penalties.
  int32_t Sample(std::span<float> logits, std::span<const int32_t> history, GeneratedToken* out);

  // The penalty transforms of Sample alone, in place: repetition penalty over
  // `history`, then frequency and presence penalties over the tokens returned
  // so far. Changes nothing in the Sampler.
  void Penalize(std::span<float> logits, std::span<const int32_t> history) const;

  // Whether Sample would pick its token exactly as BackendOps::SampleRows does
  // with row(): no penalties and no top_logprobs to report.
  bool SamplesOnDevice() const;
  // The RowSampling of this sampler's next draw(s): `draw` (from Draws) is the
  // uniform of the next token when not greedy.
  RowSampling Row(double draw) const;
  // The uniforms the next n calls of Sample would draw (none when greedy),
  // without drawing them: a step samples several rows of a sequence at once
  // (a speculative verification) before it knows how many it keeps.
  std::vector<double> Draws(int32_t n) const;
  // Takes the token sampled elsewhere with Row(Draws(..)[k]) as this sampler's
  // own: advances the generator past one draw, as Sample would have.
  void Took(int32_t token);

 private:
  SamplingParams params_;
  std::unordered_map<int32_t, int32_t> generated_counts_;  // token -> times returned
  std::mt19937_64 rng_;
  std::vector<float> logsoftmax_;                    // scratch
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
};

}  // namespace sinew::model
