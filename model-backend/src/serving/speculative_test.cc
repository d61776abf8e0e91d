// Prompt-lookup speculative decoding: the drafter alone, then the ServingEngine
// with speculation against itself without it. Every row of a verified draft is
// sampled exactly as plain decoding samples it, and with batch invariance the
// rows' logits are bit-identical to single-token decodes, so outputs must be
// identical: greedy and seeded sampling, random models of three weight types
// and stories260K, many prompts at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "draft_length_policy.h"
#include "prompt_lookup.h"
#include "random_model.h"
#include "random_model_fixture.h"
#include "serving_test_util.h"
#include "sinew/model/serving.h"
#include "sinew/model/tokenizer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

TEST(PromptLookupTest, DraftsWhatFollowedTheLatestLongestMatch) {
  // Suffix {7, 8, 9} occurs at 1 (followed by 4, 5) and at 6 (followed by 1, 2, 3).
  const std::vector<int32_t> tokens = {0, 7, 8, 9, 4, 5, 7, 8, 9, 1, 2, 3, 6, 7, 8, 9};
  EXPECT_EQ(PromptLookupDraft(tokens, 3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(PromptLookupDraft(tokens, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(PromptLookupDraft(tokens, 0).empty());
  // The longest suffix wins over a more recent shorter one: {5, 6} last occurs
  // at 3, but {4, 5, 6} only at 0.
  const std::vector<int32_t> longer = {4, 5, 6, 10, 5, 6, 11, 4, 5, 6};
  EXPECT_EQ(PromptLookupDraft(longer, 2), (std::vector<int32_t>{10, 5}));
  // No earlier occurrence of even two tokens: no draft.
  EXPECT_TRUE(PromptLookupDraft(std::vector<int32_t>{1, 2, 3, 4, 5}, 4).empty());
  // A draft is cut at the end of the context (overlapping repeats)...
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{3, 3, 3}, 5), (std::vector<int32_t>{3}));
  // ... so in a loop an older occurrence, followed by a full draft, is taken.
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{7, 7, 7, 7, 7, 7, 7, 7}, 3),
            (std::vector<int32_t>{7, 7, 7}));
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{1, 2, 1, 2, 1, 2, 1, 2}, 3),
            (std::vector<int32_t>{1, 2, 1}));
  PromptLookupOptions single;
  single.ngram_min = 1;
  EXPECT_EQ(PromptLookupDraft(std::vector<int32_t>{1, 2, 3, 2}, 4, single),
            (std::vector<int32_t>{3, 2}));
}

TEST(DraftLengthPolicyTest, DraftsAsMuchAsPaysAndStopsWhenNothingDoes) {
  DraftLengthPolicy policy;
  EXPECT_EQ(policy.Admit(3), DraftUse::kOn) << "nothing measured yet: draft";
  EXPECT_EQ(policy.Length(3, DraftUse::kOn), 3) << "nothing measured yet: draft in full";
  EXPECT_EQ(policy.Length(0, DraftUse::kOn), 0);
  policy.ObserveModelStep(0.010);
  policy.ObserveDraftRound(0.001);  // a draft round costs a tenth of a step
  for (int i = 0; i < 200; ++i) policy.ObserveVerification(3, 3);
  EXPECT_GT(policy.acceptance(), 0.99);
  EXPECT_EQ(policy.Length(3, DraftUse::kOn), 3);
  EXPECT_EQ(policy.Length(7, DraftUse::kOn), 7);
  // Half the drafted tokens right: (1 + 0.5 + 0.25) / 1.2 beats both 1 and 3 tokens.
  for (int i = 0; i < 400; ++i) policy.ObserveVerification(1, i % 2);
  EXPECT_NEAR(policy.acceptance(), 0.5, 0.02);
  EXPECT_EQ(policy.Length(3, DraftUse::kOn), 2);
  EXPECT_EQ(policy.Admit(3), DraftUse::kOn);
  // Drafts that are never right never pay, however cheap: sequences stop using
  // the draft model, and one new sequence in kTrialEvery drafts one token a step.
  for (int i = 0; i < 400; ++i) policy.ObserveVerification(3, 0);
  EXPECT_EQ(policy.Length(3, DraftUse::kOn), 0);
  EXPECT_EQ(policy.Length(3, DraftUse::kTrial), 1);
  std::vector<DraftUse> uses;
  for (int i = 0; i < 2 * DraftLengthPolicy::kTrialEvery; ++i) uses.push_back(policy.Admit(3));
  EXPECT_EQ(std::count(uses.begin(), uses.end(), DraftUse::kTrial), 2);
  EXPECT_EQ(std::count(uses.begin(), uses.end(), DraftUse::kOff),
            2 * DraftLengthPolicy::kTrialEvery - 2);
  // Always right but as slow as the model itself (a model drafting for itself):
  // k drafted tokens cost k steps for k more tokens, no gain.
  DraftLengthPolicy same_size;
  same_size.ObserveModelStep(0.010);
  same_size.ObserveDraftRound(0.010);
  for (int i = 0; i < 200; ++i) same_size.ObserveVerification(3, 3);
  EXPECT_EQ(same_size.Length(3, DraftUse::kOn), 0);
}

using testing::Ids;

// Each prompt from its own thread; prompt i is sampled with params[i % size].
std::vector<std::vector<int32_t>> RunAll(ServingEngine& engine,
                                         const std::vector<std::vector<int32_t>>& prompts,
                                         const std::vector<SamplingParams>& params) {
  std::vector<std::vector<int32_t>> out(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = engine.Generate(prompts[i], params[i % params.size()], nullptr);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out[i] = Ids(*r);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<SamplingParams> GreedyAndSampled(int32_t max_tokens) {
  SamplingParams greedy;
  greedy.greedy = true;
  greedy.max_tokens = max_tokens;
  greedy.stop_at_eos = false;
  SamplingParams sampled = greedy;
  sampled.greedy = false;
  sampled.temperature = 0.7f;
  sampled.top_k = 20;
  sampled.seed = 1234;
  return {greedy, greedy, sampled};
}

ServingOptions Plain() {
  ServingOptions o;
  o.speculative_draft_tokens = 0;
  return o;
}

ServingOptions Speculative(int32_t draft) {
  ServingOptions o;
  o.speculative_draft_tokens = draft;
  o.speculative_free_rows_only = false;  // every decode speculates, however many run
  return o;
}

class SpeculativeRandomModelTest : public RandomServingModelTest {
 protected:
  SpeculativeRandomModelTest() : RandomServingModelTest(300, 21, "sinew_spec_") {}
};

// Prompts that repeat a phrase (so that drafts exist from the start) and
// plain random ones.
std::vector<std::vector<int32_t>> RepeatingPrompts(int count) {
  std::vector<std::vector<int32_t>> prompts;
  uint32_t state = 5;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int32_t>((state >> 8) % 290u) + 3;
  };
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> phrase;
    for (int j = 0; j < 6 + i % 9; ++j) phrase.push_back(next());
    std::vector<int32_t> p = {1};
    const int repeats = i % 3 == 2 ? 1 : 3;
    for (int r = 0; r < repeats; ++r) p.insert(p.end(), phrase.begin(), phrase.end());
    p.insert(p.end(), phrase.begin(), phrase.begin() + 2);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

TEST_P(SpeculativeRandomModelTest, SpeculativeOutputEqualsPlainOutput) {
  auto plain = Load(Plain());
  ASSERT_NE(plain, nullptr);
  const auto prompts = RepeatingPrompts(14);
  const auto params = GreedyAndSampled(40);
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < prompts.size(); ++i) {  // one at a time: the reference
    auto r = plain->Generate(prompts[i], params[i % params.size()], nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(Ids(*r));
  }
  // The default (drafts only in the rows up to a group of four), and every decode with
  // drafts of 3 and 7.
  for (int32_t draft : {0, 3, 7}) {
    auto spec = Load(draft == 0 ? ServingOptions{} : Speculative(draft));
    ASSERT_NE(spec, nullptr);
    for (size_t i = 0; i < 3; ++i) {  // alone
      auto r = spec->Generate(prompts[i], params[i % params.size()], nullptr);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(Ids(*r), expected[i]) << "draft " << draft << " prompt " << i << " alone";
    }
    EXPECT_EQ(RunAll(*spec, prompts, params), expected) << "draft " << draft << " concurrent";
    const ServingStats stats = spec->stats();
    if (draft == 0) {
      // The default drafts only into the rows of a step's last group of four:
      // the SIMD CPU kernels take four rows per weight load, scalar ones one.
      if (spec->info().simd == "cpu-scalar") {
        EXPECT_EQ(stats.spec_verifications, 0u);
      } else {
        EXPECT_GT(stats.spec_verifications, 0u) << spec->info().simd;
        EXPECT_GT(stats.spec_accepted_tokens, 0u);
      }
      continue;
    }
    EXPECT_GT(stats.spec_verifications, 0u);
    EXPECT_GT(stats.spec_accepted_tokens, 0u) << "no draft was ever right: the check is vacuous";
    EXPECT_LE(stats.spec_accepted_tokens, stats.spec_drafted_tokens);
    EXPECT_GT(stats.spec_emitted_tokens, stats.spec_verifications);
  }
  EXPECT_EQ(plain->stats().spec_verifications, 0u);
}

// Prompts of random tokens, no phrase repeated: prompt lookup finds little, so
// the draft model drafts.
std::vector<std::vector<int32_t>> RandomPrompts(int count) {
  std::vector<std::vector<int32_t>> prompts;
  uint32_t state = 77;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p = {1};
    for (int j = 0; j < 5 + i % 11; ++j) {
      state = state * 1664525u + 1013904223u;
      p.push_back(static_cast<int32_t>((state >> 8) % 290u) + 3);
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// Draft-model speculation against plain decoding, with three draft models over
// the same vocabulary: the model itself (its greedy drafts are right), a model
// of another seed (mostly wrong) and a smaller one (other sizes and one layer).
// Outputs must be identical, alone and concurrent, greedy and seeded.
TEST_P(SpeculativeRandomModelTest, DraftModelOutputEqualsPlainOutput) {
  const std::string other = path_ + ".other.gguf", small = path_ + ".small.gguf";
  testing::RandomModelSpec spec = Spec();  // the model's sizes, another seed
  spec.seed = 99;
  ASSERT_TRUE(testing::WriteRandomModel(spec, other).ok());
  spec.n_embd = 64;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 128;
  spec.n_layer = 1;
  ASSERT_TRUE(testing::WriteRandomModel(spec, small).ok());

  auto plain = Load(Plain());
  ASSERT_NE(plain, nullptr);
  const auto prompts = RandomPrompts(12);
  const auto params = GreedyAndSampled(32);
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = plain->Generate(prompts[i], params[i % params.size()], nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(Ids(*r));
  }
  // Each draft model in every decode, whatever it pays; then the small one as
  // much as the measured times say (which decodes draft then varies by machine).
  for (const auto& [draft_path, adaptive] : std::vector<std::pair<std::string, bool>>{
           {path_, false}, {other, false}, {small, false}, {small, true}}) {
    ServingOptions options = Speculative(3);
    options.draft_model_path = draft_path;
    options.draft_model_adaptive = adaptive;
    auto spec_engine = Load(options);
    ASSERT_NE(spec_engine, nullptr);
    for (size_t i = 0; i < 3; ++i) {  // alone
      auto r = spec_engine->Generate(prompts[i], params[i % params.size()], nullptr);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(Ids(*r), expected[i]) << draft_path << " prompt " << i << " alone";
    }
    EXPECT_EQ(RunAll(*spec_engine, prompts, params), expected) << draft_path << " concurrent";
    const ServingStats stats = spec_engine->stats();
    if (!adaptive) {
      EXPECT_GT(stats.spec_model_drafted_tokens, 0u) << draft_path;
    }
    EXPECT_LE(stats.spec_model_accepted_tokens, stats.spec_model_drafted_tokens);
    EXPECT_LE(stats.spec_model_drafted_tokens, stats.spec_drafted_tokens);
  }
  // The model drafting for itself, greedy only: the CPU computes a row alike in
  // any batch, so every draft is right; a wrong one would mean the draft KV had
  // drifted from the sequence (catch-up or truncation out of step).
  ServingOptions options = Speculative(3);
  options.draft_model_path = path_;
  options.prompt_lookup = false;  // every draft from the draft model
  options.draft_model_adaptive = false;
  auto self = Load(options);
  ASSERT_NE(self, nullptr);
  const std::vector<SamplingParams> greedy = {params[0]};
  std::vector<std::vector<int32_t>> expected_greedy;
  for (size_t i = 0; i < prompts.size(); i += 3) expected_greedy.push_back(expected[i]);
  std::vector<std::vector<int32_t>> greedy_prompts;
  for (size_t i = 0; i < prompts.size(); i += 3) greedy_prompts.push_back(prompts[i]);
  EXPECT_EQ(RunAll(*self, greedy_prompts, greedy), expected_greedy);
  // The same prompts again, after a long shared prefix: the draft model starts
  // from its prefix cache, and its drafts are still all right.
  std::vector<int32_t> shared;
  for (int32_t i = 0; i < 40; ++i) shared.push_back(3 + (i * 37) % 290);
  std::vector<std::vector<int32_t>> long_prompts;
  for (const auto& p : greedy_prompts) {
    long_prompts.push_back(shared);
    long_prompts.back().insert(long_prompts.back().end(), p.begin(), p.end());
  }
  const auto long_expected = RunAll(*plain, long_prompts, greedy);
  EXPECT_EQ(RunAll(*self, long_prompts, greedy), long_expected);
  EXPECT_EQ(RunAll(*self, long_prompts, greedy), long_expected);
  const ServingStats stats = self->stats();
  EXPECT_GE(stats.spec_model_prefix_hit_tokens, 32u * long_prompts.size())
      << "the second run finds at least the two full blocks of the shared prefix";
  EXPECT_GT(stats.spec_model_drafted_tokens, 0u);
  EXPECT_EQ(stats.spec_model_drafted_tokens, stats.spec_drafted_tokens);
  EXPECT_EQ(stats.spec_model_accepted_tokens, stats.spec_model_drafted_tokens);
  std::filesystem::remove(other);
  std::filesystem::remove(small);
}

TEST_P(SpeculativeRandomModelTest, DraftModelWithAnotherVocabularyIsRefusedAtLoad) {
  const std::string other = path_ + ".vocab.gguf";
  testing::RandomModelSpec spec;
  spec.n_vocab = 320;
  spec.weight_type = GetParam();
  ASSERT_TRUE(testing::WriteRandomModel(spec, other).ok());
  ServingOptions options;
  options.draft_model_path = other;
  EngineOptions eo;
  eo.n_threads = 2;
  auto engine = ServingEngine::Load(path_, eo, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("another vocabulary than the model (320 tokens "
                                           "against 300, first difference at token 300)"),
            std::string::npos)
      << engine.status().ToString();
  options.draft_model_path = path_ + ".missing.gguf";
  auto missing = ServingEngine::Load(path_, eo, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(".missing.gguf"), std::string::npos)
      << missing.status().ToString();
  std::filesystem::remove(other);
}

INSTANTIATE_TEST_SUITE_P(Types, SpeculativeRandomModelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

// The copy circuit (tests/copy_circuit.h): a model whose greedy output re-emits its
// context, as an agent's model does when it writes a file out again with a change.
// Its output must be the file's continuation (the circuit works in this weight type),
// the same with speculation as without, and prompt lookup's drafts mostly right.
class SpeculativeCopyModelTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(SpeculativeCopyModelTest, ReEmittedFileKeepsItsTextAndMostDraftsAreAccepted) {
  testing::RandomModelSpec spec;
  spec.n_vocab = 300;
  spec.n_embd = 768;
  spec.n_head = 12;
  spec.n_head_kv = 4;
  spec.n_layer = 2;
  spec.n_ff = 256;
  spec.n_ctx = 512;
  spec.weight_type = GetParam();
  spec.copy_circuit = true;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("sinew_copy_" + std::to_string(static_cast<int>(GetParam())) + "_" +
                             std::to_string(::getpid()) + ".gguf"))
                               .string();
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  // The file: 120 distinct tokens. The prompt: the file, a separator, then the file
  // again with token 3 changed, cut after token 20.
  std::vector<int32_t> file;
  for (int32_t i = 0; i < 120; ++i) file.push_back(3 + (i * 97) % 297);
  std::vector<int32_t> prompt = {1};
  prompt.insert(prompt.end(), file.begin(), file.end());
  prompt.insert(prompt.end(), {299, 298});
  std::vector<int32_t> copy(file.begin(), file.begin() + 21);
  copy[3] = 7;
  prompt.insert(prompt.end(), copy.begin(), copy.end());
  SamplingParams greedy;
  greedy.greedy = true;
  greedy.max_tokens = 60;
  greedy.stop_at_eos = false;
  const std::vector<int32_t> expected(file.begin() + 21, file.begin() + 81);

  EngineOptions eo;
  eo.n_threads = 2;
  auto plain = ServingEngine::Load(path, eo, Plain());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto r = (*plain)->Generate(prompt, greedy, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Ids(*r), expected) << "the circuit does not copy in " << GgmlTypeName(GetParam());
  for (const ServingOptions& options : {ServingOptions{}, Speculative(7)}) {
    auto spec_engine = ServingEngine::Load(path, eo, options);
    ASSERT_TRUE(spec_engine.ok()) << spec_engine.status().ToString();
    auto s = (*spec_engine)->Generate(prompt, greedy, nullptr);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(Ids(*s), Ids(*r));
    const ServingStats stats = (*spec_engine)->stats();
    if ((*spec_engine)->info().simd == "cpu-scalar" && options.speculative_free_rows_only) continue;
    ASSERT_GT(stats.spec_drafted_tokens, 0u);
    // Copying 60 tokens from the context: every draft after the first is right.
    EXPECT_GE(static_cast<double>(stats.spec_accepted_tokens) /
                  static_cast<double>(stats.spec_drafted_tokens),
              0.9)
        << stats.spec_accepted_tokens << " of " << stats.spec_drafted_tokens;
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, SpeculativeCopyModelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

TEST(CopyCircuitTest, ShapesItCannotHoldAreRefused) {
  testing::RandomModelSpec spec;  // n_embd 256: no room for the circuit's slots
  spec.copy_circuit = true;
  const Status status = testing::WriteRandomModel(spec, "/nonexistent/never-written.gguf");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
}

// stories260K asked to tell again a story it has in its context (the shape of an
// agent re-emitting a file with small changes): drafts are mostly right, and
// the output is the same as without speculation and as the reference Engine.
TEST(SpeculativeStories260K, RetoldStoryEqualsPlainDecodingAndReference) {
  const std::string path = testutil::Stories260KPath();
  EngineOptions eo;
  eo.n_threads = 2;
  auto plain = ServingEngine::Load(path, eo, Plain());
  auto spec = ServingEngine::Load(path, eo, Speculative(7));
  ASSERT_TRUE(plain.ok() && spec.ok());
  auto tokenizer = Tokenizer::FromGguf((*spec)->gguf());
  ASSERT_TRUE(tokenizer.ok());
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.";
  std::vector<std::vector<int32_t>> prompts;
  for (const char* start : {"Once upon a time", "Once upon a time, there was a little boy",
                            "One day, she saw", "Tom had a dog", "Lily and Ben"}) {
    prompts.push_back((*tokenizer)->Encode(story + "\n" + start));
  }
  const auto params = GreedyAndSampled(48);
  const auto want = RunAll(**plain, prompts, params);
  EXPECT_EQ(RunAll(**spec, prompts, params), want);
  auto reference = Engine::Load(path, eo);  // one request at a time
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  for (size_t i = 0; i < prompts.size(); i += 3) {  // greedy ones vs the one-at-a-time Engine
    auto r = (*reference)->Generate(prompts[i], params[0], nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Ids(*r), want[i]) << "prompt " << i;
  }
  const ServingStats stats = (*spec)->stats();
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
  RecordProperty("acceptance", std::to_string(static_cast<double>(stats.spec_accepted_tokens) /
                                              static_cast<double>(stats.spec_drafted_tokens)));
  RecordProperty("tokens_per_verification",
                 std::to_string(static_cast<double>(stats.spec_emitted_tokens) /
                                static_cast<double>(stats.spec_verifications)));
}

// stories260K drafting for itself through the draft-model path, on prompts
// with nothing to look up: the output is the plain output, and the greedy
// drafts are right.
TEST(SpeculativeStories260K, DraftModelOutputEqualsPlainDecoding) {
  const std::string path = testutil::Stories260KPath();
  EngineOptions eo;
  eo.n_threads = 2;
  ServingOptions options = Speculative(3);
  options.draft_model_path = path;
  options.draft_model_adaptive = false;
  auto plain = ServingEngine::Load(path, eo, Plain());
  auto spec = ServingEngine::Load(path, eo, options);
  ASSERT_TRUE(plain.ok() && spec.ok());
  auto tokenizer = Tokenizer::FromGguf((*spec)->gguf());
  ASSERT_TRUE(tokenizer.ok());
  std::vector<std::vector<int32_t>> prompts;
  for (const char* start : {"Once upon a time", "Tom had a dog", "Lily and Ben went to the park",
                            "The sun was hot"}) {
    prompts.push_back((*tokenizer)->Encode(start));
  }
  const auto params = GreedyAndSampled(40);
  EXPECT_EQ(RunAll(**spec, prompts, params), RunAll(**plain, prompts, params));
  const ServingStats stats = (*spec)->stats();
  EXPECT_GT(stats.spec_model_drafted_tokens, 0u);
  EXPECT_GT(stats.spec_model_accepted_tokens, 0u);
  RecordProperty("model_acceptance",
                 std::to_string(static_cast<double>(stats.spec_model_accepted_tokens) /
                                static_cast<double>(stats.spec_model_drafted_tokens)));
}

}  // namespace
}  // namespace sinew::model
