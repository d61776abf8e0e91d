// bench_serving: what the ServingEngine buys over the same engine run one
// request at a time.
//   bench_serving [--model FILE.gguf] [--device cpu|cuda:N] [--threads N]
//                 [--streams 1,8,32] [--prompt 17] [--tokens 32] [--reference 1]
//                 [--max-running 32] [--step-tokens 512] [--device-sampling 1] [--overlap 1]
//                 [--draft-tokens 3] [--turns 20]
//                 [--sections throughput,agent,pressure]
//                 [--embd 512] [--layers 8] [--ff 1408] [--pressure-only 1]
// Without --model it writes a random-weight llama (by default ~28M parameters,
// Q8_0, vocab 4096; --embd/--layers/--ff change its shape) to a temporary file. Prints:
//  1. throughput: --streams concurrent streams of --prompt prompt tokens and
//     --tokens new ones, greedy, with and without batch-invariant padding:
//     aggregate generated tokens / wall time (prefill included) and the
//     generation rate once every stream has its first token (tokens generated
//     after that moment / the time after it: what llama-batched-bench calls
//     S_TG), and with --reference 1 Engine::Generate run one request at a time
//     (ratio);
//  2. an agent-shaped workload: each turn re-sends the whole history plus a
//     short new message; time to first token per turn, prefix cache on and off;
//  3. memory pressure: 16 streams of 32 prompt + 224 new tokens in a KV cache of
//     one context (2048 positions): all are admitted, then outgrow the cache
//     as they decode, so that preemption is constant. Wall time with preempted
//     sequences swapped to host memory against recomputed.
// --draft-tokens: prompt-lookup draft length (0: no speculation; on the CPU
// drafting wins over step overlap). --overlap: 1 overlaps steps where the backend queues work (the default,
// ServingOptions::overlap_steps), 0 never, 2 on the CPU too (overlap_steps_always).
// Lines starting with "RESULT" carry the figures in key=value form for scripts
// (model-backend/bench/run_gpu_serving_bench.sh).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
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

struct ThroughputShape {
  int streams = 1;
  int prompt = 17;
  int tokens = 32;
  bool reference = true;
};

// reference: the one-request Engine on the same file and options (null: none).
void Throughput(ServingEngine& serving, Engine* reference, const ThroughputShape& shape,
                const char* mode) {
  uint32_t state = 11u + static_cast<uint32_t>(shape.streams);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < shape.streams; ++i) {
    std::vector<int32_t> p = {1};
    auto rest = RandomTokens(serving.info().n_vocab, shape.prompt - 1, state);
    p.insert(p.end(), rest.begin(), rest.end());
    prompts.push_back(std::move(p));
  }
  // Reference: the same model, one request at a time.
  double ref_tps = 0;
  if (reference != nullptr) {
    const auto start = Clock::now();
    int64_t ref_tokens = 0;
    for (const auto& p : prompts) {
      auto r = reference->Generate(p, Params(shape.tokens), nullptr);
      if (r.ok()) ref_tokens += static_cast<int64_t>(r->tokens.size());
    }
    ref_tps = static_cast<double>(ref_tokens) / Seconds(start);
  }
  // Served: all streams at once; every token's arrival time is kept.
  std::vector<std::vector<double>> arrivals(prompts.size());
  std::vector<std::string> errors(prompts.size());
  std::vector<std::thread> threads;
  const ServingStats before_run = serving.stats();
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    arrivals[i].reserve(static_cast<size_t>(shape.tokens));
    threads.emplace_back([&, i] {
      auto r = serving.Generate(prompts[i], Params(shape.tokens), [&](const GeneratedToken&) {
        arrivals[i].push_back(Seconds(start));
        return true;
      });
      if (!r.ok()) errors[i] = r.status().ToString();
    });
  }
  for (auto& t : threads) t.join();
  const double wall = Seconds(start);
  for (const std::string& e : errors) {
    if (!e.empty()) {
      std::printf("streams %d: a generation failed: %s\n", shape.streams, e.c_str());
      return;
    }
  }
  int64_t tokens = 0;
  double all_started = 0;  // when the last stream got its first token
  for (const auto& a : arrivals) {
    tokens += static_cast<int64_t>(a.size());
    if (!a.empty()) all_started = std::max(all_started, a.front());
  }
  int64_t after = 0;
  for (const auto& a : arrivals) {
    for (double t : a) after += t > all_started ? 1 : 0;
  }
  const ServingStats after_run = serving.stats();
  const double e2e_tps = static_cast<double>(tokens) / wall;
  const double gen_tps = wall > all_started ? static_cast<double>(after) / (wall - all_started) : 0;
  std::printf("streams %3d: %8.1f tok/s end to end, %8.1f tok/s generating", shape.streams, e2e_tps,
              gen_tps);
  if (reference != nullptr) {
    std::printf("   one-at-a-time %8.1f tok/s   ratio %.2fx", ref_tps, e2e_tps / ref_tps);
  }
  // Where the step loop's time went (ServingStats::plan_ns and the rest).
  const double steps = static_cast<double>(after_run.steps - before_run.steps);
  auto us = [steps](uint64_t a, uint64_t b) {
    return steps > 0 ? static_cast<double>(b - a) / 1e3 / steps : 0.0;
  };
  const double plan_us = us(before_run.plan_ns, after_run.plan_ns);
  const double forward_us = us(before_run.forward_ns, after_run.forward_ns);
  const double sample_us = us(before_run.sample_ns, after_run.sample_ns);
  const double absorb_us = us(before_run.absorb_ns, after_run.absorb_ns);
  const double overlapped =
      static_cast<double>(after_run.overlapped_steps - before_run.overlapped_steps);
  std::printf(
      "\n            per step (%.0f steps, %.0f overlapped): plan %.0f us, forward %.0f us, "
      "sample %.0f us, take in %.0f us",
      steps, overlapped, plan_us, forward_us, sample_us, absorb_us);
  std::printf(
      "\nRESULT throughput mode=%s streams=%d prompt=%d tokens=%d wall_s=%.3f "
      "all_started_s=%.3f e2e_tps=%.1f gen_tps=%.1f ref_tps=%.1f steps=%.0f overlapped=%.0f "
      "plan_us=%.1f forward_us=%.1f sample_us=%.1f absorb_us=%.1f\n",
      mode, shape.streams, shape.prompt, shape.tokens, wall, all_started, e2e_tps, gen_tps, ref_tps,
      steps, overlapped, plan_us, forward_us, sample_us, absorb_us);
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
    std::printf("RESULT pressure mode=%s wall_s=%.3f preemptions=%llu swap_outs=%llu\n",
                swap_mib > 0 ? "swap" : "recompute", s,
                static_cast<unsigned long long>(st.preemptions),
                static_cast<unsigned long long>(st.swap_outs));
    if (swap_mib == 0) recompute_s = s;
  }
}

// One short generation, so that no measurement pays first-touch costs (page
// faults, CUDA module loading, cuBLAS handles).
// One short generation before measuring (the weights paged in, buffers sized).
template <typename AnyEngine>
void WarmUp(AnyEngine& engine) {
  uint32_t state = 7;
  std::vector<int32_t> p = {1};
  auto rest = RandomTokens(engine.info().n_vocab, 40, state);
  p.insert(p.end(), rest.begin(), rest.end());
  (void)engine.Generate(p, Params(8), nullptr);
}

std::vector<int> IntList(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0) return {};
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return {};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, device = "cpu", sections = "throughput,agent,pressure";
  int threads = 2, turns = 20, embd = 512, layers = 8, ff = 1408, max_running = 32;
  int step_tokens = ServingOptions().step_tokens;
  bool device_sampling = ServingOptions().device_sampling;
  int overlap = 1;
  int draft_tokens = ServingOptions().speculative_draft_tokens;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "options come in pairs; see the comment at the top of bench_serving.cc\n");
    return 2;
  }
  ThroughputShape shape;
  shape.prompt = 17;
  shape.tokens = 32;
  std::vector<int> streams = {1, 8, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* v = argv[i + 1];
    if (std::strcmp(argv[i], "--model") == 0)
      model = v;
    else if (std::strcmp(argv[i], "--device") == 0)
      device = v;
    else if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::atoi(v);
    else if (std::strcmp(argv[i], "--tokens") == 0)
      shape.tokens = std::atoi(v);
    else if (std::strcmp(argv[i], "--prompt") == 0)
      shape.prompt = std::atoi(v);
    else if (std::strcmp(argv[i], "--reference") == 0)
      shape.reference = std::atoi(v) != 0;
    else if (std::strcmp(argv[i], "--streams") == 0)
      streams = IntList(v);
    else if (std::strcmp(argv[i], "--max-running") == 0)
      max_running = std::atoi(v);
    else if (std::strcmp(argv[i], "--step-tokens") == 0)
      step_tokens = std::atoi(v);
    else if (std::strcmp(argv[i], "--device-sampling") == 0)
      device_sampling = std::atoi(v) != 0;
    else if (std::strcmp(argv[i], "--overlap") == 0)
      overlap = std::atoi(v);
    else if (std::strcmp(argv[i], "--draft-tokens") == 0)
      draft_tokens = std::atoi(v);
    else if (std::strcmp(argv[i], "--turns") == 0)
      turns = std::atoi(v);
    else if (std::strcmp(argv[i], "--sections") == 0)
      sections = v;
    else if (std::strcmp(argv[i], "--embd") == 0)
      embd = std::atoi(v);
    else if (std::strcmp(argv[i], "--layers") == 0)
      layers = std::atoi(v);
    else if (std::strcmp(argv[i], "--ff") == 0)
      ff = std::atoi(v);
    else if (std::strcmp(argv[i], "--pressure-only") == 0 && std::atoi(v) != 0)
      sections = "pressure";
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of bench_serving.cc)\n",
                   argv[i]);
      return 2;
    }
  }
  if (streams.empty() || shape.prompt < 1 || shape.tokens < 1 || max_running < 1 ||
      step_tokens < 1) {
    std::fprintf(stderr,
                 "--streams, --prompt, --tokens, --max-running and --step-tokens take "
                 "positive numbers\n");
    return 2;
  }
  auto section = [&sections](const char* name) {
    return ("," + sections + ",").find("," + std::string(name) + ",") != std::string::npos;
  };
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
  eo.device = device;
  const int most_streams = *std::max_element(streams.begin(), streams.end());
  // The one-request reference of the throughput section: an Engine on the same
  // file and options, loaded before the ServingEngines.
  std::unique_ptr<Engine> reference;
  if (shape.reference && section("throughput")) {
    auto loaded = Engine::Load(model, eo);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    reference = std::move(loaded).value();
    WarmUp(*reference);
  }
  for (bool cache : {true, false}) {
    ServingOptions so;
    so.prefix_cache = cache;
    so.max_running = std::max(max_running, most_streams);
    so.max_waiting = std::max(so.max_waiting, most_streams);
    so.step_tokens = step_tokens;
    so.device_sampling = device_sampling;
    so.overlap_steps = overlap != 0;
    so.overlap_steps_always = overlap == 2;
    so.speculative_draft_tokens = draft_tokens;
    auto serving = ServingEngine::Load(model, eo, so);
    if (!serving.ok()) {
      std::fprintf(stderr, "%s\n", serving.status().ToString().c_str());
      return 1;
    }
    WarmUp(**serving);
    const ModelInfo& mi = (*serving)->info();
    if (cache) {
      std::printf("model %s: %s %s, %lld params, device %s, %d threads, simd %s\n", model.c_str(),
                  mi.arch.c_str(), mi.weight_type.c_str(), static_cast<long long>(mi.n_params),
                  mi.device.c_str(), threads, mi.simd.c_str());
    }
    if (cache && section("throughput")) {
      std::printf(
          "== throughput: %d prompt + %d new tokens per stream, greedy, "
          "batch-invariant ==\n",
          shape.prompt, shape.tokens);
      for (int n : streams) {
        shape.streams = n;
        Throughput(**serving, reference.get(), shape, "invariant");
      }
      ServingOptions loose = so;
      loose.batch_invariant = false;
      serving->reset();  // one ServingEngine in memory at a time
      {
        auto fast = ServingEngine::Load(model, eo, loose);
        if (fast.ok()) {
          WarmUp(**fast);
          std::printf("== throughput without batch-invariant padding ==\n");
          for (int n : streams) {
            shape.streams = n;
            Throughput(**fast, reference.get(), shape, "loose");
          }
        }
      }
      serving = ServingEngine::Load(model, eo, so);
      if (!serving.ok()) {
        std::fprintf(stderr, "%s\n", serving.status().ToString().c_str());
        return 1;
      }
      WarmUp(**serving);
    }
    if (!section("agent")) continue;
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
      std::printf("RESULT agent cache=%s turns=%zu ttft_ms=", cache ? "on" : "off", ttft.size());
      for (size_t t = 0; t < ttft.size(); ++t) std::printf("%s%.1f", t ? "," : "", ttft[t]);
      std::printf("\n");
    }
  }
  if (section("pressure")) Pressure(model, eo);
  if (!temp.empty()) std::filesystem::remove(temp);
  return 0;
}
