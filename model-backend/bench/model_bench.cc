// sinew-model-bench: prompt-processing and generation tokens/s of the engine,
// llama-bench style (pp: one batch of P prompt tokens; tg: N tokens generated
// one at a time from a one-token context), and the writer of the random-weight
// benchmark models.
//
//   sinew-model-bench --write-random DIR         writes bench-{F16,Q8_0,Q4_K}.gguf (~125M params)
//                     [--write-types F16,Q8_0,Q4_K] (any of F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)
//                     [--copy-circuit]  copy-TYPE.gguf instead: the induction circuit that
//                                       re-emits its context (tests/copy_circuit.h)
//   sinew-model-bench --write-llama-1b DIR       writes llama1b-{F16,Q8_0,Q4_K}.gguf (1.1B params)
//   sinew-model-bench -m A.gguf [-m B.gguf] [-t 1,2] [-p 128] [-n 32] [-r 3]
//                     [--device cpu|cuda[:N]] [--cache-type-k f16] [--cache-type-v f16]
//
// Prints one line per (model, threads, test) as tab-separated values:
//   model  type  params  backend  threads  test  tokens_per_second
// where backend is the kernels that ran (cpu-scalar, cpu-avx2, cpu-avx512, cuda-...):
// --simd auto takes the best level the CPU has, capped by SINEW_CPU_LEVEL
// (scalar, avx2 or avx512) in the environment.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "random_model.h"
#include "sinew/model/engine.h"

namespace {

using sinew::model::Engine;
using sinew::model::EngineOptions;
using sinew::model::GenerationResult;
using sinew::model::GgmlType;
using sinew::model::SamplingParams;

// ~125M parameters (CPU benchmark) or, with `large`, the 1.1B llama of the
// GPU benchmark: embedding 2048, 16 layers, feed-forward 8192, 32 heads, 8 KV
// heads. The files are written by one thread each, at once.
int WriteRandomModels(const std::string& dir, bool large, const std::vector<GgmlType>& types,
                      bool copy_circuit) {
  std::vector<int> failures(types.size(), 0);
  std::vector<std::thread> writers;
  for (size_t i = 0; i < types.size(); ++i) {
    writers.emplace_back([&, i] {
      const GgmlType type = types[i];
      sinew::model::testing::RandomModelSpec spec;
      spec.arch = "llama";
      spec.n_vocab = 32000;
      spec.n_embd = large ? 2048 : 768;
      spec.n_layer = large ? 16 : 12;
      spec.n_head = large ? 32 : 12;
      spec.n_head_kv = large ? 8 : 4;
      spec.n_ff = large ? 8192 : 2048;
      spec.n_ctx = 2048;
      spec.weight_type = type;
      // Embeddings in Q8_0 for the quantized models (rows are looked up, not multiplied).
      spec.embd_type = type == GgmlType::kF16 ? GgmlType::kF16 : GgmlType::kQ8_0;
      spec.seed = 42;
      spec.copy_circuit = copy_circuit;
      const std::string path = dir +
                               (large          ? "/llama1b-"
                                : copy_circuit ? "/copy-"
                                               : "/bench-") +
                               std::string(sinew::model::GgmlTypeName(type)) + ".gguf";
      const auto start = std::chrono::steady_clock::now();
      auto status = sinew::model::testing::WriteRandomModel(spec, path);
      if (!status.ok()) {
        std::fprintf(stderr, "%s\n", status.ToString().c_str());
        failures[i] = 1;
        return;
      }
      std::fprintf(stderr, "wrote %s (%.1fM params) in %.1f s\n", path.c_str(),
                   static_cast<double>(sinew::model::testing::RandomModelParams(spec)) / 1e6,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
  }
  for (std::thread& t : writers) t.join();
  return std::count(failures.begin(), failures.end(), 1) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sinew model engine benchmark"};
  std::string write_dir;
  std::vector<std::string> models;
  std::vector<int> threads = {1, 2};
  int n_prompt = 128, n_gen = 32, reps = 3;
  std::string simd = "auto";
  app.add_option("--write-random", write_dir, "write the random-weight benchmark models to DIR");
  std::string write_1b_dir;
  app.add_option("--write-llama-1b", write_1b_dir,
                 "write the 1.1B random llama of the GPU benchmark (F16, Q8_0, Q4_K) to DIR");
  // Weight types a model can be written in, by name.
  std::map<std::string, GgmlType> writable;
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                     GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    writable.emplace(sinew::model::GgmlTypeName(t), t);
  }
  std::vector<std::string> write_types = {"F16", "Q8_0", "Q4_K"};
  app.add_option("--write-types", write_types, "weight types of the written models")
      ->delimiter(',')
      ->check(CLI::IsMember(writable))
      ->capture_default_str();
  bool copy_circuit = false;
  app.add_flag("--copy-circuit", copy_circuit,
               "with --write-random: copy-TYPE.gguf, the same shape with the hand-set induction "
               "circuit of tests/copy_circuit.h (its greedy output continues its context as it "
               "went before)");
  app.add_option("-m,--model", models, "GGUF model(s) to benchmark");
  app.add_option("-t,--threads", threads, "thread counts")->delimiter(',');
  app.add_option("-p,--n-prompt", n_prompt, "prompt tokens (pp test)")->check(CLI::Range(1, 4096));
  app.add_option("-n,--n-gen", n_gen, "generated tokens (tg test)")->check(CLI::Range(1, 4096));
  app.add_option("-r,--repetitions", reps, "repetitions (the best is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--simd", simd,
                 "auto, avx512, avx2 or scalar (auto: the best the CPU has, at most SINEW_CPU_LEVEL)");
  std::string device = "cpu", cache_type_k = "f16", cache_type_v = "f16";
  app.add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--cache-type-k", cache_type_k, "KV cache key type: f32, f16 or q8_0")
      ->capture_default_str();
  app.add_option("--cache-type-v", cache_type_v, "KV cache value type: f32, f16 or q8_0")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto type_k = sinew::model::ParseCacheType(cache_type_k);
  auto type_v = sinew::model::ParseCacheType(cache_type_v);
  if (!type_k.ok() || !type_v.ok()) {
    std::fprintf(stderr, "%s\n", (type_k.ok() ? type_v : type_k).status().ToString().c_str());
    return 2;
  }
  std::vector<GgmlType> types;
  for (const std::string& name : write_types) types.push_back(writable.at(name));
  if (!write_dir.empty()) return WriteRandomModels(write_dir, false, types, copy_circuit);
  if (!write_1b_dir.empty()) return WriteRandomModels(write_1b_dir, true, types, false);
  if (models.empty()) {
    std::fprintf(stderr, "nothing to do: give --write-random DIR or -m MODEL\n");
    return 2;
  }
  std::printf("model\ttype\tparams\tbackend\tthreads\ttest\ttokens_per_second\n");
  for (const std::string& path : models) {
    for (int t : threads) {
      EngineOptions options;
      options.n_threads = t;
      options.simd = simd;
      options.device = device;
      options.cache_type_k = *type_k;
      options.cache_type_v = *type_v;
      options.n_batch = n_prompt;
      options.n_ctx = std::max(n_prompt, n_gen) + 8;
      auto engine = Engine::Load(path, options);
      if (!engine.ok()) {
        std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
        return 1;
      }
      const auto& info = (*engine)->info();
      std::mt19937 rng(1);
      std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
      for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(info.n_vocab));
      SamplingParams pp;
      pp.greedy = true;
      pp.max_tokens = 1;
      SamplingParams tg;
      tg.greedy = true;
      tg.max_tokens = n_gen + 1;
      tg.stop_at_eos = false;
      double best_pp = 0, best_tg = 0;
      for (int r = 0; r <= reps; ++r) {  // r == 0 warms up
        auto a = (*engine)->Generate(prompt, pp, nullptr);
        auto b = (*engine)->Generate({prompt[0]}, tg, nullptr);
        if (!a.ok() || !b.ok()) {
          std::fprintf(stderr, "generation failed\n");
          return 1;
        }
        if (r == 0) continue;
        best_pp = std::max(best_pp, n_prompt / (a->timings.prompt_ms / 1000.0));
        best_tg = std::max(best_tg, (b->timings.generated_tokens - 1) /
                                        (b->timings.generation_ms / 1000.0));
      }
      const std::string name = path.substr(path.find_last_of('/') + 1);
      std::printf("%s\t%s\t%lld\t%s\t%d\tpp%d\t%.2f\n", name.c_str(), info.weight_type.c_str(),
                  static_cast<long long>(info.n_params), info.simd.c_str(), t, n_prompt, best_pp);
      std::printf("%s\t%s\t%lld\t%s\t%d\ttg%d\t%.2f\n", name.c_str(), info.weight_type.c_str(),
                  static_cast<long long>(info.n_params), info.simd.c_str(), t, n_gen, best_tg);
      std::fflush(stdout);
    }
  }
  return 0;
}
