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

#include "prompt_lookup.h"
#include "random_model.h"
#include "random_model_fixture.h"
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

std::vector<int32_t> Ids(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

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

INSTANTIATE_TEST_SUITE_P(Types, SpeculativeRandomModelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

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
  for (size_t i = 0; i < prompts.size(); i += 3) {  // greedy ones vs the one-at-a-time Engine
    auto r = (*spec)->engine().Generate(prompts[i], params[0], nullptr);
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

}  // namespace
}  // namespace sinew::model
