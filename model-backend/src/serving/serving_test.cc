// ServingEngine against the one-request-at-a-time Engine and against itself:
// batched and single greedy outputs are identical, prefix cache on and off give
// identical outputs, preemption under memory pressure changes nothing, and
// overload is refused instead of queued without bound.
#include "sinew/model/serving.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "random_model.h"
#include "random_model_fixture.h"
#include "serving_test_device.h"
#include "serving_test_util.h"
#include "sinew/model/tokenizer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

using testing::Greedy;
using testing::Ids;
using testing::MakePrompts;
using testing::RunConcurrently;

constexpr const char* kExpected =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

class ServingRandomModelTest : public RandomServingModelTest {
 protected:
  ServingRandomModelTest() : RandomServingModelTest(256, 7, "sinew_serving_") {}
};

TEST_P(ServingRandomModelTest, BatchedEqualsSingleAndPrefixCacheChangesNothing) {
  ServingOptions single_opts;
  single_opts.max_running = 1;
  single_opts.prefix_cache = false;
  single_opts.speculative_draft_tokens = 0;  // plain decoding is the reference
  auto single = Load(single_opts);
  ASSERT_NE(single, nullptr);
  const auto prompts = MakePrompts(single->info().n_vocab, 12, 3);
  const SamplingParams params = Greedy(20);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    auto r = single->Generate(p, params, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tokens.size(), 20u);
    expected.push_back(Ids(*r));
  }

  // Batched, small prompt chunks and step budget (chunked prefill), cache off.
  ServingOptions batched_opts;
  batched_opts.prefix_cache = false;
  batched_opts.prefill_chunk = 7;
  batched_opts.step_tokens = 24;
  auto batched = Load(batched_opts);
  ASSERT_NE(batched, nullptr);
  EXPECT_EQ(RunConcurrently(*batched, prompts, params), expected);
  EXPECT_EQ(batched->stats().prefix_hit_tokens, 0u);
  EXPECT_GT(batched->stats().steps, 0u);

  // Prefix cache on: run twice; the second round hits the cache and agrees.
  ServingOptions cached_opts;
  auto cached = Load(cached_opts);
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(RunConcurrently(*cached, prompts, params), expected);
  EXPECT_EQ(RunConcurrently(*cached, prompts, params), expected);
  EXPECT_GT(cached->stats().prefix_hit_tokens, 0u);
  EXPECT_GT(cached->stats().prefix_miss_tokens, 0u);
}

// Memory pressure: the cache holds one context (16 blocks of 16 positions) and
// twelve sequences of 45 to 120 positions run at once, so the later ones must
// preempt earlier ones. Whether a preempted sequence's KV is swapped out to host
// memory or recomputed, the outputs are those of single runs, and in the end
// every block and every swap slot is free again.
TEST_P(ServingRandomModelTest, PreemptionBySwapOrRecomputeChangesNothingAndFreesEverything) {
  ServingOptions single_opts;
  single_opts.max_running = 1;
  single_opts.prefix_cache = false;
  single_opts.speculative_draft_tokens = 0;
  auto single = Load(single_opts);
  ASSERT_NE(single, nullptr);
  const auto prompts = MakePrompts(single->info().n_vocab, 12, 3);
  const SamplingParams params = Greedy(48);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    auto r = single->Generate(p, params, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(Ids(*r));
  }
  struct Case {
    const char* name;
    double swap_space_mib;
    bool prefix_cache;
  };
  // The swap space of 0.05 MiB has a few slots only, so that preemptions may
  // find it full and recompute while others swap.
  for (const Case& c : {Case{"recompute", 0, false}, Case{"swap", 64, false},
                        Case{"swap and prefix cache", 64, true},
                        Case{"a swap space too small for all", 0.05, false}}) {
    SCOPED_TRACE(c.name);
    ServingOptions tight_opts;
    tight_opts.n_blocks = 16;
    tight_opts.prefix_cache = c.prefix_cache;
    tight_opts.swap_space_mib = c.swap_space_mib;
    auto tight = Load(tight_opts);
    ASSERT_NE(tight, nullptr);
    EXPECT_EQ(RunConcurrently(*tight, prompts, params), expected);
    const ServingStats stats = StatsOnceFree(*tight, 16);
    EXPECT_GT(stats.preemptions, 0u);
    EXPECT_EQ(stats.blocks_available, 16);
    EXPECT_EQ(stats.swap_slots_used, 0);
    if (c.swap_space_mib == 0) {
      EXPECT_EQ(stats.swap_outs, 0u);
      EXPECT_EQ(stats.swap_slots_total, 0);
      continue;
    }
    EXPECT_LE(stats.swap_outs, stats.preemptions);
    if (c.swap_space_mib < 1) {
      // Whether a preemption finds room here depends on the threads' timing;
      // either way nothing may change or leak.
      EXPECT_LT(stats.swap_slots_total, 16);
      continue;
    }
    EXPECT_GT(stats.swap_outs, 0u);
    EXPECT_GT(stats.swap_in_tokens, 0u);
  }
}

// Decode steps padded to their bucket (1, 2, 4, ..., 128) with dummy sequences,
// which a GPU replays from one captured graph per bucket: the dummies write to
// a spare block and are never sampled, so outputs are those of single runs and
// every block is free in the end. On the CPU the padding is forced
// (pad_decode_steps) and costs the dummies' rows; on a GPU the steps must also
// have been replayed from graphs.
TEST_P(ServingRandomModelTest, DecodeStepsPaddedToGraphBucketsChangeNothing) {
  ServingOptions single_opts;
  single_opts.max_running = 1;
  single_opts.prefix_cache = false;
  single_opts.step_graphs = false;
  single_opts.speculative_draft_tokens = 0;
  auto single = Load(single_opts);
  ASSERT_NE(single, nullptr);
  const auto prompts = MakePrompts(Spec().n_vocab, 11, 9);  // 11 streams: bucket 16
  const SamplingParams params = Greedy(40);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    auto r = single->Generate(p, params, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected.push_back(Ids(*r));
  }
  ServingOptions padded_opts;
  padded_opts.pad_decode_steps = true;
  padded_opts.speculative_draft_tokens = 0;  // decode steps only, once prompts are in
  padded_opts.n_blocks = 64;
  auto padded = Load(padded_opts);
  ASSERT_NE(padded, nullptr);
  EXPECT_EQ(RunConcurrently(*padded, prompts, params), expected);
  EXPECT_EQ(RunConcurrently(*padded, prompts, params), expected);  // again, cache warm
  ServingOptions plain_opts = padded_opts;
  plain_opts.pad_decode_steps = false;
  plain_opts.step_graphs = false;
  auto plain = Load(plain_opts);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(RunConcurrently(*plain, prompts, params), expected);
  EXPECT_EQ(RunConcurrently(*plain, prompts, params), expected);
  const ServingStats with = StatsOnceFree(*padded, 64), without = plain->stats();
  // The same steps, but the padded ones ran the dummies' tokens too.
  EXPECT_GT(with.step_tokens, without.step_tokens);
  EXPECT_EQ(with.blocks_total, 64);  // the spare block is not the scheduler's
  EXPECT_EQ(with.blocks_available, 64);
  if (std::string_view(testing::kServingTestDevice) == "cuda") {
    EXPECT_GT(with.step_graph_captures, 0u);
    EXPECT_GT(with.step_graph_replays, 0u);
  } else {
    EXPECT_EQ(with.step_graph_captures, 0u);
  }
}

// Sampling by the backend (SampleRows, one call per step) or on the host from
// logits read back gives the same tokens and log-probabilities: greedy and
// seeded temperature / top-k / top-p / min-p sampling, batched, with prompt-
// lookup drafts in the steps; requests with penalties or top_logprobs are
// sampled on the host either way. On the CPU both paths run ChooseToken: every
// sequence is equal. A GPU's kernel sums in another order and may take a
// draw's neighbour at a bucket boundary (sample_select.h), after which that
// sequence goes its own way: there, greedy sequences must be equal and at most
// one sampled sequence may differ.
TEST_P(ServingRandomModelTest, BackendAndHostSamplingGiveTheSameTokens) {
  std::vector<SamplingParams> variants(7);
  variants[0] = Greedy(24);
  for (size_t v = 1; v < variants.size(); ++v) {
    variants[v].max_tokens = 24;
    variants[v].stop_at_eos = false;
    variants[v].temperature = 0.6f + 0.15f * static_cast<float>(v);
  }
  variants[2].top_k = 20;
  variants[3].top_p = 0.8f;
  variants[4].min_p = 0.1f;
  variants[5].repetition_penalty = 1.3f;  // on the host
  variants[6].logprobs = 3;               // on the host
  const auto prompts = MakePrompts(Spec().n_vocab, 6, 5);
  struct Request {
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  std::vector<Request> requests;
  for (size_t v = 0; v < variants.size(); ++v) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      SamplingParams p = variants[v];
      p.seed = 100 * v + i;
      requests.push_back({prompts[i], p});
    }
  }
  auto run = [&](ServingEngine& engine) {
    std::vector<GenerationResult> out(requests.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < requests.size(); ++i) {
      threads.emplace_back([&, i] {
        auto r = engine.Generate(requests[i].prompt, requests[i].params, nullptr);
        if (r.ok()) out[i] = std::move(r).value();
      });
    }
    for (auto& t : threads) t.join();
    return out;
  };
  ServingOptions backend_opts;
  auto backend = Load(backend_opts);
  ServingOptions host_opts;
  host_opts.device_sampling = false;
  auto host = Load(host_opts);
  ServingOptions single_opts;
  single_opts.max_running = 1;
  auto single = Load(single_opts);
  ASSERT_TRUE(backend && host && single);
  const std::vector<GenerationResult> by_backend = run(*backend);
  const std::vector<GenerationResult> by_host = run(*host);
  const std::vector<GenerationResult> alone = run(*single);
  EXPECT_GT(backend->stats().backend_sampled_tokens, 0u);
  EXPECT_GT(backend->stats().host_sampled_tokens, 0u);  // the penalties and top_logprobs
  EXPECT_EQ(host->stats().backend_sampled_tokens, 0u);
  const bool gpu = std::string_view(testing::kServingTestDevice) == "cuda";
  for (const auto* other : {&by_host, &alone}) {
    int differ = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_EQ(by_backend[i].tokens.size(), 24u) << i;
      bool same = Ids(by_backend[i]) == Ids((*other)[i]);
      for (size_t t = 0; same && t < by_backend[i].tokens.size(); ++t) {
        if (!gpu) {
          EXPECT_EQ(by_backend[i].tokens[t].logprob, (*other)[i].tokens[t].logprob) << i;
        }
      }
      if (same) continue;
      ++differ;
      EXPECT_FALSE(requests[i].params.greedy) << "greedy request " << i << " differs";
      EXPECT_TRUE(gpu) << "request " << i << " differs";
    }
    EXPECT_LE(differ, gpu ? 1 : 0);
  }
  // Seeds decide: the same request again gives the same tokens; another seed others.
  const auto again = run(*backend);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(Ids(again[i]), Ids(by_backend[i])) << i;
  size_t seeded_apart = 0;
  for (size_t i = prompts.size(); i + 1 < requests.size(); ++i) {
    seeded_apart += Ids(by_backend[i]) != Ids(by_backend[i + 1]) ? 1 : 0;
  }
  EXPECT_GT(seeded_apart, requests.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Types, ServingRandomModelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

TEST(ServingStories260K, GreedyTextMatchesTheReferenceWhileBatched) {
  SKIP_WITHOUT_TEST_DEVICE();
  const std::string path = testutil::Stories260KPath();
  EngineOptions eo = testing::ServingTestEngineOptions(2);
  auto engine = ServingEngine::Load(path, eo, testing::ServingTestOptions());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto tokenizer = Tokenizer::FromGguf((*engine)->gguf());
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<int32_t> prompt = (*tokenizer)->Encode("Once upon a time");
  // The parity prompt alongside others, all at once.
  std::vector<std::vector<int32_t>> prompts = {prompt};
  for (const char* text : {"Tom had a dog", "The sun was", "One day a bird", "Lily and Ben"}) {
    prompts.push_back((*tokenizer)->Encode(text));
  }
  auto out = RunConcurrently(**engine, prompts, Greedy(64));
  EXPECT_EQ((*tokenizer)->Decode(out[0]), kExpected);
  auto reference = Engine::Load(path, eo);  // one request at a time
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  for (size_t i = 1; i < prompts.size(); ++i) {
    auto r = (*reference)->Generate(prompts[i], Greedy(64), nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(out[i], Ids(*r)) << "prompt " << i;
  }
}

TEST(ServingStories260K, OverloadIsRefusedAndCallbacksStop) {
  SKIP_WITHOUT_TEST_DEVICE();
  EngineOptions eo = testing::ServingTestEngineOptions(1);
  ServingOptions so;
  so.max_waiting = 0;  // nothing may wait: every request is refused
  auto engine =
      ServingEngine::Load(testutil::Stories260KPath(), eo, testing::ServingTestOptions(so));
  ASSERT_TRUE(engine.ok());
  auto r = (*engine)->Generate({1, 20, 30}, Greedy(4), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  auto ok_engine =
      ServingEngine::Load(testutil::Stories260KPath(), eo, testing::ServingTestOptions());
  ASSERT_TRUE(ok_engine.ok());
  int seen = 0;
  auto stopped = (*ok_engine)->Generate({1, 20, 30}, Greedy(50), [&](const GeneratedToken&) {
    return ++seen < 3;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->tokens.size(), 3u);
  EXPECT_EQ(stopped->finish_reason, FinishReason::kCallback);
  auto bad = (*ok_engine)->Generate({1, 100000}, Greedy(4), nullptr);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  ServingOptions too_small;
  too_small.n_blocks = 1;
  EXPECT_EQ(ServingEngine::Load(testutil::Stories260KPath(), eo, too_small).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sinew::model
