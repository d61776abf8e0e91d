// Random-weight models in every supported architecture and tensor type, checked
// against the independent reference (reference_model.h).
//
// Tolerance, as normalised mean squared error of all logits of a 12-token
// prompt, NMSE = sum (engine - ref)^2 / sum ref^2:
//   F32, F16, BF16 weights (F32 activations), F32 KV cache:  < 1e-8
//     the same with an F16 KV cache (the default):         < 1e-6
//     the same with a Q8_0 KV cache:                        < 1e-4
//   Q8_0, Q4_0, Q4_K, Q6_K (activations quantized to 8 bits): < 2e-3
// The reference dequantizes the same stored weights, so the quantized rows
// differ only by the engine's 8-bit activation quantization and float rounding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "random_model.h"
#include "reference_model.h"
#include "sinew/model/engine.h"

namespace sinew::model {

// Readable test names in ctest ("... GetParam() = (\"llama\", Q4_K)").
void PrintTo(GgmlType type, std::ostream* os) { *os << GgmlTypeName(type); }

namespace {

using testing::RandomModelSpec;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/sinew_" + name + "_" + std::to_string(getpid()) + ".gguf";
}

double Nmse(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return err / ref;
}

bool IsQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16;
}

RandomModelSpec SpecFor(const std::string& arch, GgmlType type) {
  RandomModelSpec s;
  s.arch = arch;
  s.weight_type = type;
  s.embd_type = type;
  if (arch == "llama") {
    s.n_head = 8;
    s.n_head_kv = 2;  // GQA, 4 query heads per KV head
  } else if (arch == "qwen2") {
    s.n_head = 8;
    s.n_head_kv = 4;
    s.rope_base = 1000000.0f;
    s.tied_output = true;
  } else {  // qwen3: head size 64 independent of n_embd / n_head
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.rope_linear_factor = 2.0f;
  }
  return s;
}

class ModelReferenceTest
    : public ::testing::TestWithParam<std::tuple<std::string, GgmlType>> {};

TEST_P(ModelReferenceTest, LogitsMatchReference) {
  const auto& [arch, type] = GetParam();
  const std::string path = TempPath(arch + "_" + std::string(GgmlTypeName(type)));
  ASSERT_TRUE(testing::WriteRandomModel(SpecFor(arch, type), path).ok());
  auto ref = testing::ReferenceModel::Load(path);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 42, 7, 300, 123, 5, 64};
  const std::vector<double> want = (*ref)->Logits(tokens);
  struct Run {
    const char* simd;
    GgmlType cache;
    double tolerance;
  };
  std::vector<Run> runs;
  if (IsQuantized(type)) {
    runs = {{"scalar", GgmlType::kF16, 2e-3}, {"auto", GgmlType::kF16, 2e-3}};
  } else {
    runs = {{"scalar", GgmlType::kF32, 1e-8}, {"auto", GgmlType::kF32, 1e-8},
            {"auto", GgmlType::kF16, 1e-6}, {"auto", GgmlType::kQ8_0, 1e-4}};
  }
  for (const auto& [simd, cache, tolerance] : runs) {
    EngineOptions options;
    options.n_threads = 2;
    options.simd = simd;
    options.cache_type_k = options.cache_type_v = cache;
    options.n_batch = 5;  // several batches, so the KV cache carries across them
    auto engine = Engine::Load(path, options);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    EXPECT_EQ((*engine)->info().arch, arch);
    auto got = (*engine)->Evaluate(tokens, /*all_logits=*/true);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want.size());
    const double nmse = Nmse(*got, want);
    EXPECT_LT(nmse, tolerance) << arch << " " << GgmlTypeName(type) << " simd=" << simd
                               << " cache " << GgmlTypeName(cache);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g", nmse);
    RecordProperty(std::string("nmse_") + simd + "_" + std::string(GgmlTypeName(cache)), buf);
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    ArchsAndTypes, ModelReferenceTest,
    ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3"),
                       ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                         GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                         GgmlType::kQ6_K)),
    [](const auto& param_info) {
      return std::get<0>(param_info.param) + "_" +
             std::string(GgmlTypeName(std::get<1>(param_info.param)));
    });

// Token-by-token generation through the KV cache picks the same greedy tokens
// as the reference recomputing everything, for every architecture.
TEST(ModelReferenceGreedy, GenerationMatchesReferenceArgmax) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    const std::string path = TempPath(std::string("greedy_") + arch);
    ASSERT_TRUE(testing::WriteRandomModel(SpecFor(arch, GgmlType::kF32), path).ok());
    auto ref = testing::ReferenceModel::Load(path);
    ASSERT_TRUE(ref.ok());
    EngineOptions options;
    options.n_threads = 2;
    for (GgmlType kv : {GgmlType::kF32, GgmlType::kF16}) {
      options.cache_type_k = options.cache_type_v = kv;
      auto engine = Engine::Load(path, options);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      SamplingParams params;
      params.greedy = true;
      params.max_tokens = 10;
      params.stop_at_eos = false;
      std::vector<int32_t> seq = {1, 5, 9, 200};
      auto result = (*engine)->Generate(seq, params, nullptr);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      ASSERT_EQ(result->tokens.size(), 10u);
      for (const GeneratedToken& t : result->tokens) {
        const std::vector<double> logits = (*ref)->Logits(seq);
        const size_t V = static_cast<size_t>((*ref)->n_vocab());
        size_t best = 0;
        for (size_t i = 1; i < V; ++i) {
          if (logits[logits.size() - V + i] > logits[logits.size() - V + best]) best = i;
        }
        ASSERT_EQ(t.id, static_cast<int32_t>(best)) << arch << " cache " << GgmlTypeName(kv)
                                                    << " at step " << seq.size();
        seq.push_back(t.id);
      }
    }
    std::remove(path.c_str());
  }
}


// YaRN RoPE scaling (rope.scaling.type = yarn) against the double-precision
// reference: normal (llama) and NeoX (qwen2) rotation, with and without an
// attn_factor, over 48 positions; the YaRN logits differ clearly from the same
// model with linear scaling (the ramp and the magnitude scale take effect).
TEST(ModelReferenceYarn, LogitsMatchReference) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 48; ++i) tokens.push_back((i * 37 + 11) % 300);
  for (const char* arch : {"llama", "qwen2"}) {
    for (float attn_factor : {0.0f, 0.85f}) {  // 0: key absent (1)
      RandomModelSpec spec = SpecFor(arch, GgmlType::kF32);
      spec.rope_linear_factor = 0;
      spec.rope_yarn_factor = 4.0f;
      spec.rope_yarn_orig_ctx = 2048;  // ramp over pairs 4..11 of 16 (llama)
      spec.rope_yarn_attn_factor = attn_factor;
      const std::string path = TempPath(std::string("yarn_") + arch);
      ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
      auto ref = testing::ReferenceModel::Load(path);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      const std::vector<double> want = (*ref)->Logits(tokens);
      EngineOptions options;
      options.n_threads = 2;
      options.cache_type_k = options.cache_type_v = GgmlType::kF32;
      options.n_batch = 7;
      auto engine = Engine::Load(path, options);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      auto got = (*engine)->Evaluate(tokens, /*all_logits=*/true);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), want.size());
      EXPECT_LT(Nmse(*got, want), 1e-8) << arch << " attn_factor " << attn_factor;

      spec.rope_yarn_factor = 0;
      spec.rope_linear_factor = 4.0f;
      const std::string linear_path = TempPath(std::string("yarn_linear_") + arch);
      ASSERT_TRUE(testing::WriteRandomModel(spec, linear_path).ok());
      auto linear = testing::ReferenceModel::Load(linear_path);
      ASSERT_TRUE(linear.ok());
      const std::vector<double> linear_logits = (*linear)->Logits(tokens);
      EXPECT_GT(Nmse(std::vector<float>(linear_logits.begin(), linear_logits.end()), want), 1e-4)
          << arch;
      std::remove(path.c_str());
      std::remove(linear_path.c_str());
    }
  }
}

}  // namespace
}  // namespace sinew::model
