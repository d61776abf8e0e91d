// Engine behaviour: sampling transforms, seeds, logprobs, finish reasons and
// every error path of Load() and Generate(), on small random-weight models and
// on stories260K.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "random_model.h"
#include "sinew/model/engine.h"
#include "sinew/model/gguf_writer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/sinew_engine_" + name + "_" + std::to_string(getpid()) + ".gguf";
}

std::vector<int32_t> Ids(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions options;
    options.n_threads = 2;
    auto engine = Engine::Load(testutil::Stories260KPath(), options);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }

  GenerationResult Run(const SamplingParams& params,
                       const std::function<bool(const GeneratedToken&)>& cb = nullptr) {
    auto r = engine_->Generate(prompt_, params, cb);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : GenerationResult{};
  }

  static Engine* engine_;
  const std::vector<int32_t> prompt_ = {1, 403, 407, 261, 378};
};
Engine* EngineTest::engine_ = nullptr;

TEST_F(EngineTest, InfoDescribesTheModel) {
  const ModelInfo& info = engine_->info();
  EXPECT_EQ(info.arch, "llama");
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.n_layer, 5);
  EXPECT_EQ(info.n_head, 8);
  EXPECT_EQ(info.n_head_kv, 4);
  EXPECT_EQ(info.n_ctx, 2048);
  EXPECT_EQ(info.bos_id, 1);
  EXPECT_EQ(info.eos_id, 2);
  EXPECT_EQ(info.weight_type, "F32");
  EXPECT_GT(info.n_params, 200000);
}

TEST_F(EngineTest, SameSeedSameOutputOtherSeedOtherOutput) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.max_tokens = 48;
  params.seed = 7;
  const auto a = Ids(Run(params));
  const auto b = Ids(Run(params));
  params.seed = 8;
  const auto c = Ids(Run(params));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(EngineTest, DegenerateFiltersEqualGreedy) {
  SamplingParams greedy;
  greedy.greedy = true;
  greedy.max_tokens = 24;
  const auto want = Ids(Run(greedy));
  SamplingParams p;
  p.max_tokens = 24;
  p.seed = 3;
  p.top_k = 1;
  EXPECT_EQ(Ids(Run(p)), want) << "top_k=1";
  p.top_k = 0;
  p.top_p = 1e-6f;
  EXPECT_EQ(Ids(Run(p)), want) << "tiny top_p";
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  EXPECT_EQ(Ids(Run(p)), want) << "min_p=1";
  p.min_p = 0.0f;
  p.temperature = 0.0f;
  EXPECT_EQ(Ids(Run(p)), want) << "temperature 0";
}

TEST_F(EngineTest, LogprobsAreTheModelsDistribution) {
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = 4;
  p.logprobs = 5;
  const GenerationResult r = Run(p);
  ASSERT_EQ(r.tokens.size(), 4u);
  for (const GeneratedToken& t : r.tokens) {
    ASSERT_EQ(t.top_logprobs.size(), 5u);
    EXPECT_EQ(t.top_logprobs[0].id, t.id);  // greedy takes the most likely
    EXPECT_FLOAT_EQ(t.top_logprobs[0].logprob, t.logprob);
    EXPECT_LE(t.logprob, 0.0f);
    double mass = 0;
    for (size_t i = 0; i < t.top_logprobs.size(); ++i) {
      mass += std::exp(t.top_logprobs[i].logprob);
      if (i > 0) {
        EXPECT_LE(t.top_logprobs[i].logprob, t.top_logprobs[i - 1].logprob);
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
  // Cross-check the first token's logprob with a log-softmax of Evaluate's logits.
  auto logits = engine_->Evaluate(prompt_, false);
  ASSERT_TRUE(logits.ok());
  double z = 0;
  for (float l : *logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(r.tokens[0].logprob, (*logits)[static_cast<size_t>(r.tokens[0].id)] - std::log(z),
              1e-4);
}

TEST_F(EngineTest, FinishReasons) {
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = 9;
  GenerationResult r = Run(p);
  EXPECT_EQ(r.tokens.size(), 9u);
  EXPECT_EQ(r.finish_reason, FinishReason::kMaxTokens);
  EXPECT_EQ(r.timings.prompt_tokens, 5);
  EXPECT_EQ(r.timings.generated_tokens, 9);
  int seen = 0;
  r = Run(p, [&](const GeneratedToken&) { return ++seen < 3; });
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish_reason, FinishReason::kCallback);
  EXPECT_EQ(FinishReasonName(FinishReason::kMaxTokens), "length");
}

TEST(EngineSmallContextTest, StopsWhenTheContextIsFull) {
  EngineOptions options;
  options.n_ctx = 16;
  options.n_threads = 1;
  auto engine = Engine::Load(testutil::Stories260KPath(), options);
  ASSERT_TRUE(engine.ok());
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = 100;
  auto r = (*engine)->Generate({1, 403, 407, 261, 378, 261, 378, 261, 378, 261}, p, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(r->tokens.size(), 7u);  // positions 10..15 fed back, plus the last sampled token
  // A prompt that leaves no room for a new token is refused.
  std::vector<int32_t> long_prompt(16, 261);
  EXPECT_EQ((*engine)->Generate(long_prompt, p, nullptr).status().code(), StatusCode::kOutOfRange);
}

// The largest context allowed reserves a 1.3 GB cache for stories260K but touches
// only the positions in use.
TEST(EngineSmallContextTest, LargestContextLoadsLazily) {
  EngineOptions options;
  options.n_ctx = EngineOptions::kMaxContext;
  options.n_threads = 1;
  auto engine = Engine::Load(testutil::Stories260KPath(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->info().n_ctx, EngineOptions::kMaxContext);
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = 4;
  auto r = (*engine)->Generate({1, 403, 407, 261, 378}, p, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tokens.size(), 4u);
}

TEST(EngineStopTokenTest, StopsAtEndOfGeneration) {
  const std::string path = TempPath("eos");
  testing::RandomModelSpec spec;
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = 5;
  int32_t first = -1;
  {
    auto engine = Engine::Load(path, EngineOptions{});
    ASSERT_TRUE(engine.ok());
    auto r = (*engine)->Generate({1, 2, 3}, p, nullptr);
    ASSERT_TRUE(r.ok());
    first = r->tokens[0].id;
  }
  spec.eos_id = first;  // the same weights, with the greedy token as EOS
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  auto engine = Engine::Load(path, EngineOptions{});
  ASSERT_TRUE(engine.ok());
  auto r = (*engine)->Generate({1, 2, 3}, p, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kStopToken);
  ASSERT_EQ(r->tokens.size(), 1u);
  EXPECT_EQ(r->tokens[0].id, first);
  p.stop_at_eos = false;
  r = (*engine)->Generate({1, 2, 3}, p, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 5u);
  std::remove(path.c_str());
}

TEST(SamplerTest, RepetitionPenaltyAndValidation) {
  SamplingParams p;
  p.greedy = true;
  p.repetition_penalty = 2.0f;
  Sampler sampler(p);
  std::vector<float> logits = {2.0f, 1.9f, 0.5f};
  const std::vector<int32_t> history = {0};
  GeneratedToken out;
  EXPECT_EQ(sampler.Sample(logits, history, &out), 1);  // 2.0 / 2 < 1.9
  std::vector<float> fresh = {2.0f, 1.9f, 0.5f};
  Sampler plain(SamplingParams{.greedy = true});
  EXPECT_EQ(plain.Sample(fresh, history, &out), 0);
  // logprob is the log-softmax of the raw logits.
  const double z = std::exp(2.0) + std::exp(1.9) + std::exp(0.5);
  EXPECT_NEAR(out.logprob, 2.0 - std::log(z), 1e-6);

  auto invalid = [](auto mutate) {
    SamplingParams q;
    mutate(q);
    return q.Validate().code();
  };
  EXPECT_EQ(invalid([](SamplingParams& q) { q.temperature = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.temperature = NAN; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.top_k = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.top_p = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.min_p = 2; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.repetition_penalty = 0; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.max_tokens = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.logprobs = 21; }), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
}

// Frequency and presence penalties against a double-precision reference that
// keeps its own counts of the generated tokens (OpenAI: prompt tokens do not
// count): every step's penalized logits, and the greedy choice on logits close
// enough together that the penalties decide it.
TEST(SamplerTest, FrequencyAndPresencePenaltiesMatchDoubleReference) {
  const int32_t n_vocab = 50;
  for (const auto& [frequency, presence] :
       std::vector<std::pair<float, float>>{{0.7f, 0.0f}, {0.0f, 1.3f}, {0.45f, 0.6f},
                                            {-0.3f, -0.2f}, {2.0f, -2.0f}}) {
    SamplingParams p;
    p.greedy = true;
    p.frequency_penalty = frequency;
    p.presence_penalty = presence;
    Sampler sampler(p);
    std::vector<int32_t> history = {3, 3, 7, 11};  // the prompt: never penalized
    std::vector<int32_t> counts(n_vocab, 0);
    std::mt19937 rng(static_cast<uint32_t>(frequency * 100 + presence * 10 + 5));
    std::uniform_real_distribution<float> spread(0.0f, 0.8f);
    int32_t changed_choice = 0;
    for (int step = 0; step < 40; ++step) {
      std::vector<float> logits(n_vocab);
      for (float& l : logits) l = spread(rng);
      std::vector<double> want(logits.begin(), logits.end());
      for (int32_t id = 0; id < n_vocab; ++id) {
        const double c = counts[static_cast<size_t>(id)];
        want[static_cast<size_t>(id)] -= c * static_cast<double>(frequency) +
                                          (c > 0 ? static_cast<double>(presence) : 0.0);
      }
      std::vector<float> penalized = logits;
      sampler.Penalize(penalized, history);
      for (int32_t id = 0; id < n_vocab; ++id) {
        ASSERT_NEAR(penalized[static_cast<size_t>(id)], want[static_cast<size_t>(id)], 1e-5)
            << "step " << step << " token " << id;
      }
      const int32_t want_id =
          static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
      const int32_t raw_id =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      changed_choice += want_id != raw_id ? 1 : 0;
      GeneratedToken out;
      ASSERT_EQ(sampler.Sample(logits, history, &out), want_id) << "step " << step;
      history.push_back(want_id);
      ++counts[static_cast<size_t>(want_id)];
    }
    // The penalties did change choices (the check above is not vacuous).
    if (frequency > 0 || presence > 0) {
      EXPECT_GT(changed_choice, 0);
    }
  }
  auto invalid = [](auto mutate) {
    SamplingParams q;
    mutate(q);
    return q.Validate().code();
  };
  EXPECT_EQ(invalid([](SamplingParams& q) { q.frequency_penalty = 2.5f; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid([](SamplingParams& q) { q.presence_penalty = NAN; }),
            StatusCode::kInvalidArgument);
}

// Concurrent callers are serialised: each gets exactly the output it would get alone.
TEST_F(EngineTest, ConcurrentGenerateCallsAreSerialised) {
  SamplingParams greedy;
  greedy.greedy = true;
  greedy.max_tokens = 32;
  const auto want_greedy = Ids(Run(greedy));
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 99;
  sampled.max_tokens = 32;
  const auto want_sampled = Ids(Run(sampled));
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = engine_->Generate(prompt_, i % 2 == 0 ? greedy : sampled, nullptr);
      if (r.ok()) got[i] = Ids(*r);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], i % 2 == 0 ? want_greedy : want_sampled) << "caller " << i;
  }
}

TEST_F(EngineTest, GenerateRejectsBadInput) {
  SamplingParams p;
  EXPECT_EQ(engine_->Generate({}, p, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Generate({1, 512}, p, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Generate({1, -1}, p, nullptr).status().code(), StatusCode::kInvalidArgument);
  p.top_p = 5;
  EXPECT_EQ(engine_->Generate({1}, p, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Evaluate({}, false).status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineLoadTest, RejectsBadFilesAndOptions) {
  EXPECT_EQ(Engine::Load("/nonexistent.gguf", EngineOptions{}).status().code(),
            StatusCode::kNotFound);
  EngineOptions bad;
  bad.simd = "mmx";
  EXPECT_EQ(Engine::Load(testutil::Stories260KPath(), bad).status().code(),
            StatusCode::kInvalidArgument);
  bad = EngineOptions{};
  bad.n_ctx = EngineOptions::kMaxContext + 1;
  EXPECT_EQ(Engine::Load(testutil::Stories260KPath(), bad).status().code(),
            StatusCode::kInvalidArgument);
  bad = EngineOptions{};
  bad.n_batch = 0;
  EXPECT_EQ(Engine::Load(testutil::Stories260KPath(), bad).status().code(),
            StatusCode::kInvalidArgument);

  // A truncated copy of a real model.
  const std::string path = TempPath("bad");
  {
    std::ifstream in(testutil::Stories260KPath(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto truncated = Engine::Load(path, EngineOptions{});
  EXPECT_EQ(truncated.status().code(), StatusCode::kCorruption) << truncated.status().ToString();

  // An architecture the engine does not know.
  GgufWriter w;
  w.SetString("general.architecture", "mamba");
  ASSERT_TRUE(w.WriteFile(path).ok());
  EXPECT_EQ(Engine::Load(path, EngineOptions{}).status().code(), StatusCode::kUnimplemented);

  // A model whose tensor shapes disagree with its metadata, and one missing a tensor.
  GgufWriter shapes;
  shapes.SetString("general.architecture", "llama");
  shapes.SetUint32("llama.embedding_length", 64);
  shapes.SetUint32("llama.block_count", 1);
  shapes.SetUint32("llama.feed_forward_length", 128);
  shapes.SetUint32("llama.attention.head_count", 4);
  shapes.AddTensor("token_embd.weight", GgmlType::kF32, {64, 10}, std::string(64 * 10 * 4, '\0'));
  shapes.AddTensor("output_norm.weight", GgmlType::kF32, {64}, std::string(64 * 4, '\0'));
  shapes.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {64}, std::string(64 * 4, '\0'));
  shapes.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {64, 32}, std::string(64 * 32 * 4, '\0'));
  ASSERT_TRUE(shapes.WriteFile(path).ok());
  auto wrong = Engine::Load(path, EngineOptions{});
  EXPECT_EQ(wrong.status().code(), StatusCode::kCorruption);
  EXPECT_NE(wrong.status().message().find("attn_q.weight"), std::string::npos)
      << wrong.status().ToString();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sinew::model
