// Helpers of the serving tests: greedy parameters, prompts, concurrent runs.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "sinew/model/serving.h"

namespace sinew::model::testing {

inline std::vector<int32_t> Ids(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

inline SamplingParams Greedy(int32_t max_tokens) {
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = max_tokens;
  p.stop_at_eos = false;
  return p;
}

// Runs every prompt at once, each from its own thread.
inline std::vector<std::vector<int32_t>> RunConcurrently(
    ServingEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
    const SamplingParams& params) {
  std::vector<std::vector<int32_t>> out(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = engine.Generate(prompts[i], params, nullptr);
      if (r.ok()) out[i] = Ids(*r);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Prompts of different lengths; pairs share long prefixes.
inline std::vector<std::vector<int32_t>> MakePrompts(int32_t n_vocab, int count, uint32_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  uint32_t state = seed;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(n_vocab - 3)) + 3;
  };
  std::vector<int32_t> shared;
  for (int i = 0; i < 40; ++i) shared.push_back(next());
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p;
    p.push_back(1);
    if (i % 2 == 0) p.insert(p.end(), shared.begin(), shared.end());
    const int extra = 3 + (i * 7) % 29;
    for (int j = 0; j < extra; ++j) p.push_back(next());
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace sinew::model::testing
