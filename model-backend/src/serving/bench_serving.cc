// bench_serving: what the ServingEngine buys over the same engine run one
// request at a time.
//   bench_serving [--model FILE.gguf] [--threads N] [--tokens N] [--turns N]
//                 [--embd 512] [--layers 8] [--ff 1408] [--pressure-only 1]
// Without --model it writes a random-weight llama (by default ~28M parameters,
// Q8_0, vocab 4096; --embd/--layers/--ff change its shape) to a temporary file. Prints:
//  1. aggregate generation throughput with 1, 8 and 32 concurrent streams
//     against Engine::Generate run one request at a time (ratio);
//  2. an agent-shaped workload: each turn re-sends the whole history plus a
//     short new message; time to first token per turn, prefix cache on and off;
//  3. memory pressure: 16 streams of 32 prompt + 224 new tokens in a KV cache of
//     one context (2048 positions): all are admitted, then outgrow the cache
//     as they decode, so that preemption is constant. Wall time with preempted
//     sequences swapped to host memory against recomputed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "random_model.h"
#include "sinew/model/serving.h"

namespace {

using namespace sinew::model;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<int32_t> RandomTokens(int32_t n_vocab, int n, uint32_t& state) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    out.push_back(static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(n_vocab - 3)) + 3);
  }
  return out;
}

SamplingParams Params(int32_t max_tokens) {
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = max_tokens;
  p.stop_at_eos = false;
  return p;
}

void Throughput(ServingEngine& serving, int streams, int tokens) {
  uint32_t state = 11u + static_cast<uint32_t>(streams);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < streams; ++i) {
    std::vector<int32_t> p = {1};
    auto rest = RandomTokens(serving.info().n_vocab, 16, state);
    p.insert(p.end(), rest.begin(), rest.end());
    prompts.push_back(std::move(p));
  }
  // Reference: the same engine, one request at a time.
  auto start = Clock::now();
  int64_t ref_tokens = 0;
  for (const auto& p : prompts) {
    auto r = serving.engine().Generate(p, Params(tokens), nullptr);
    if (r.ok()) ref_tokens += static_cast<int64_t>(r->tokens.size());
  }
  const double ref_s = Seconds(start);
  // Served: all streams at once.
  std::vector<int64_t> counts(prompts.size(), 0);
  std::vector<std::thread> threads;
  start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = serving.Generate(prompts[i], Params(tokens), nullptr);
      if (r.ok()) counts[i] = static_cast<int64_t>(r->tokens.size());
    });
  }
  for (auto& t : threads) t.join();
  const double srv_s = Seconds(start);
  int64_t srv_tokens = 0;
  for (int64_t c : counts) srv_tokens += c;
  const double ref_tps = static_cast<double>(ref_tokens) / ref_s;
  const double srv_tps = static_cast<double>(srv_tokens) / srv_s;
  std::printf("streams %2d: one-at-a-time %8.1f tok/s   batched %8.1f tok/s   ratio %.2fx\n",
              streams, ref_tps, srv_tps, srv_tps / ref_tps);
  std::fflush(stdout);
}

std::vector<double> AgentTurns(ServingEngine& serving, int turns) {
  uint32_t state = 99;
  const int32_t n_vocab = serving.info().n_vocab;
  std::vector<int32_t> history = {1};
  auto system = RandomTokens(n_vocab, 128, state);
  history.insert(history.end(), system.begin(), system.end());
  std::vector<double> ttft;
  for (int turn = 0; turn < turns; ++turn) {
    auto message = RandomTokens(n_vocab, 12, state);
    history.insert(history.end(), message.begin(), message.end());
    auto r = serving.Generate(history, Params(16), nullptr);
    if (!r.ok()) {
      std::printf("turn %d failed: %s\n", turn + 1, r.status().ToString().c_str());
      break;
    }
    ttft.push_back(r->timings.prompt_ms);
    for (const GeneratedToken& t : r->tokens) history.push_back(t.id);
  }
  return ttft;
}

// Section 3: the same streams with preemption by swap and by recompute.
void Pressure(const std::string& model, const EngineOptions& eo) {
  constexpr int kPrompt = 32, kNew = 224;
  std::printf("== memory pressure: 16 streams of %d + %d tokens, KV cache of one context ==\n",
              kPrompt, kNew);
  double recompute_s = 0;
  for (double swap_mib : {0.0, 1024.0}) {
    ServingOptions so;
    so.n_blocks = (eo.n_ctx + so.block_size - 1) / so.block_size;
    so.swap_space_mib = swap_mib;
    auto serving = ServingEngine::Load(model, eo, so);
    if (!serving.ok()) {
      std::printf("  %s\n", serving.status().ToString().c_str());
      return;
    }
    uint32_t state = 5;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 16; ++i) {
      std::vector<int32_t> p = {1};
      auto rest = RandomTokens((*serving)->info().n_vocab, kPrompt - 1, state);
      p.insert(p.end(), rest.begin(), rest.end());
      prompts.push_back(std::move(p));
    }
    std::vector<std::thread> threads;
    const auto start = Clock::now();
    for (const auto& p : prompts) {
      threads.emplace_back(
          [&serving, &p] { (void)(*serving)->Generate(p, Params(kNew), nullptr); });
    }
    for (auto& t : threads) t.join();
    const double s = Seconds(start);
    const ServingStats st = (*serving)->stats();
    std::printf(
        "  %-9s %7.2f s   %6.1f new tok/s   preemptions %llu (swapped %llu), "
        "step tokens %llu%s\n",
        swap_mib > 0 ? "swap" : "recompute", s, 16 * kNew / s,
        static_cast<unsigned long long>(st.preemptions),
        static_cast<unsigned long long>(st.swap_outs),
        static_cast<unsigned long long>(st.step_tokens),
        swap_mib > 0 && recompute_s > 0
            ? ("   recompute / swap time = " + std::to_string(recompute_s / s)).c_str()
            : "");
    if (swap_mib == 0) recompute_s = s;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int threads = 2, tokens = 32, turns = 20, embd = 512, layers = 8, ff = 1408, pressure_only = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--model") == 0) model = argv[i + 1];
    else if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--turns") == 0) turns = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--embd") == 0) embd = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--layers") == 0) layers = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--ff") == 0) ff = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--pressure-only") == 0)
      pressure_only = std::atoi(argv[i + 1]);
  }
  std::string temp;
  if (model.empty()) {
    testing::RandomModelSpec spec;
    spec.n_vocab = 4096;
    spec.n_embd = embd;
    spec.n_layer = layers;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = ff;
    spec.n_ctx = 2048;
    spec.weight_type = GgmlType::kQ8_0;
    temp = (std::filesystem::temp_directory_path() / "bench_serving_model.gguf").string();
    if (!testing::WriteRandomModel(spec, temp).ok()) {
      std::fprintf(stderr, "cannot write %s\n", temp.c_str());
      return 1;
    }
    model = temp;
  }
  EngineOptions eo;
  eo.n_threads = threads;
  eo.n_ctx = 2048;
  for (bool cache : {true, false}) {
    if (pressure_only != 0) break;
    ServingOptions so;
    so.prefix_cache = cache;
    auto serving = ServingEngine::Load(model, eo, so);
    if (!serving.ok()) {
      std::fprintf(stderr, "%s\n", serving.status().ToString().c_str());
      return 1;
    }
    const ModelInfo& mi = (*serving)->info();
    if (cache) {
      std::printf("model %s: %s %s, %lld params, %d threads, simd %s\n", model.c_str(),
                  mi.arch.c_str(), mi.weight_type.c_str(), static_cast<long long>(mi.n_params),
                  threads, mi.simd.c_str());
      std::printf("== throughput: %d new tokens per stream, greedy, batch-invariant ==\n",
                  tokens);
      for (int streams : {1, 8, 32}) Throughput(**serving, streams, tokens);
      ServingOptions loose = so;
      loose.batch_invariant = false;
      auto fast = ServingEngine::Load(model, eo, loose);
      if (fast.ok()) {
        std::printf("== throughput without batch-invariant padding ==\n");
        for (int streams : {1, 8, 32}) Throughput(**fast, streams, tokens);
      }
    }
    std::vector<double> ttft = AgentTurns(**serving, turns);
    std::printf("== agent workload, prefix cache %s: time to first token per turn (ms) ==\n",
                cache ? "ON" : "OFF");
    for (size_t t = 0; t < ttft.size(); ++t) {
      std::printf("%s%7.1f", t % 10 == 0 ? (t ? "\n  " : "  ") : " ", ttft[t]);
    }
    if (!ttft.empty()) {
      std::printf("\n  turn %zu / turn 1 = %.2fx   (prefix hits %llu tokens, misses %llu)\n",
                  ttft.size(), ttft.back() / ttft.front(),
                  static_cast<unsigned long long>((*serving)->stats().prefix_hit_tokens),
                  static_cast<unsigned long long>((*serving)->stats().prefix_miss_tokens));
    }
  }
  Pressure(model, eo);
  if (!temp.empty()) std::filesystem::remove(temp);
  return 0;
}
