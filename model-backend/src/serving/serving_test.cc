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
#include "sinew/model/tokenizer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

constexpr const char* kExpected =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

std::vector<int32_t> Ids(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

SamplingParams Greedy(int32_t max_tokens) {
  SamplingParams p;
  p.greedy = true;
  p.max_tokens = max_tokens;
  p.stop_at_eos = false;
  return p;
}

// Runs every prompt at once, each from its own thread.
std::vector<std::vector<int32_t>> RunConcurrently(ServingEngine& engine,
                                                  const std::vector<std::vector<int32_t>>& prompts,
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
std::vector<std::vector<int32_t>> MakePrompts(int32_t n_vocab, int count, uint32_t seed) {
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

// Step overlap: step N+1 is planned and queued before step N's tokens reach
// the host, reading them where the backend left them, and sequences that step
// N finishes have their row in step N+1 dropped. Greedy and seeded sampled
// requests of different lengths, some stopping at EOS, chunked prompts with a
// prefix cache, then a pool so small that planning ahead must give way to
// preemption, then requests cancelled mid-stream and requests sampled on the
// host (penalties) among them: every output is that of a single run, every
// block comes back, and steps did overlap. On the CPU the overlap is forced
// (overlap_steps_always); a GPU overlaps by default.
TEST_P(ServingRandomModelTest, StepOverlapChangesNothingAndFreesEverything) {
  struct Request {
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  const auto prompts = MakePrompts(Spec().n_vocab, 12, 21);
  ServingOptions single_opts;
  single_opts.max_running = 1;
  single_opts.prefix_cache = false;
  single_opts.speculative_draft_tokens = 0;
  {
    // An EOS that the model does produce: a token of a greedy run, written
    // into the model as its EOS id.
    auto probe = Load(single_opts);
    ASSERT_NE(probe, nullptr);
    auto r = probe->Generate(prompts[0], Greedy(12), nullptr);
    ASSERT_TRUE(r.ok());
    testing::RandomModelSpec spec = Spec();
    for (size_t t = 5; t < r->tokens.size() && spec.eos_id == 2; ++t) {
      if (r->tokens[t].id > 2) spec.eos_id = r->tokens[t].id;
    }
    ASSERT_NE(spec.eos_id, 2);
    ASSERT_TRUE(testing::WriteRandomModel(spec, path_).ok());
  }
  std::vector<Request> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p = Greedy(12 + 5 * static_cast<int32_t>(i % 7));
    p.stop_at_eos = true;
    if (i % 2 == 1) {
      p.greedy = false;
      p.temperature = 1.2f;
      p.top_k = 60;
      p.seed = 40 + i;
    }
    requests.push_back({prompts[i], p});
  }
  std::vector<Request> penalised = requests;
  for (size_t i = 0; i < penalised.size(); i += 3) penalised[i].params.presence_penalty = 0.7f;

  auto run = [](ServingEngine& engine, const std::vector<Request>& reqs) {
    std::vector<std::vector<int32_t>> out(reqs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < reqs.size(); ++i) {
      threads.emplace_back([&, i] {
        auto r = engine.Generate(reqs[i].prompt, reqs[i].params, nullptr);
        EXPECT_TRUE(r.ok()) << r.status().ToString();
        if (r.ok()) out[i] = Ids(*r);
      });
    }
    for (auto& t : threads) t.join();
    return out;
  };
  auto single = Load(single_opts);
  ASSERT_NE(single, nullptr);
  std::vector<std::vector<int32_t>> expected, expected_penalised;
  bool any_eos = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto r = single->Generate(requests[i].prompt, requests[i].params, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    any_eos |= r->finish_reason == FinishReason::kStopToken;
    expected.push_back(Ids(*r));
    auto q = single->Generate(penalised[i].prompt, penalised[i].params, nullptr);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    expected_penalised.push_back(Ids(*q));
  }
  ASSERT_TRUE(any_eos) << "no request stopped at EOS: the dropped rows go untested";

  ServingOptions overlap_opts;
  overlap_opts.overlap_steps_always = true;
  overlap_opts.speculative_draft_tokens = 0;  // drafting would win over overlap on the CPU
  overlap_opts.prefill_chunk = 7;
  overlap_opts.step_tokens = 24;
  overlap_opts.n_blocks = 96;
  auto overlapped = Load(overlap_opts);
  ASSERT_NE(overlapped, nullptr);
  EXPECT_EQ(run(*overlapped, requests), expected);
  EXPECT_EQ(run(*overlapped, requests), expected);  // again, from the prefix cache
  EXPECT_EQ(run(*overlapped, penalised), expected_penalised);
  ServingStats stats = StatsOnceFree(*overlapped, 96);
  EXPECT_GT(stats.overlapped_steps, stats.steps / 4) << stats.steps << " steps";
  EXPECT_GT(stats.overlap_dropped_rows, 0u);
  EXPECT_GT(stats.host_sampled_tokens, 0u);

  // Without the option, the CPU never overlaps.
  ServingOptions plain_opts = overlap_opts;
  plain_opts.overlap_steps_always = false;
  auto plain = Load(plain_opts);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(run(*plain, requests), expected);
  EXPECT_EQ(plain->stats().overlapped_steps, 0u);

  // A pool of 16 blocks for 12 sequences of 52 to 124 positions: planning
  // ahead finds no blocks and the step waits to preempt.
  std::vector<Request> long_requests;
  std::vector<std::vector<int32_t>> expected_long;
  for (const std::vector<int32_t>& prompt : prompts) {
    long_requests.push_back({prompt, Greedy(48)});
    auto r = single->Generate(prompt, Greedy(48), nullptr);
    ASSERT_TRUE(r.ok());
    expected_long.push_back(Ids(*r));
  }
  ServingOptions tight_opts = overlap_opts;
  tight_opts.n_blocks = 16;
  tight_opts.swap_space_mib = 16;
  auto tight = Load(tight_opts);
  ASSERT_NE(tight, nullptr);
  EXPECT_EQ(run(*tight, long_requests), expected_long);
  stats = StatsOnceFree(*tight, 16);
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_GT(stats.overlapped_steps, 0u);
  EXPECT_EQ(stats.swap_slots_used, 0);

  // Callers that stop after three tokens: their sequences are dropped once no
  // step holds them, and the others go on unchanged.
  std::vector<std::vector<int32_t>> got(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      int seen = 0;
      auto r =
          overlapped->Generate(requests[i].prompt, requests[i].params,
                               [&](const GeneratedToken&) { return i % 2 == 1 || ++seen < 3; });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      got[i] = Ids(*r);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i % 2 == 1) {
      EXPECT_EQ(got[i], expected[i]) << i;
    } else {
      const std::vector<int32_t> first(
          expected[i].begin(), expected[i].begin() + std::min<ptrdiff_t>(3, expected[i].size()));
      EXPECT_EQ(got[i], first) << i;
    }
  }
  StatsOnceFree(*overlapped, 96);
}

// Step overlap at the edges: prompts that end a few positions short of the
// context (a fed token that would pass it is not planned ahead, and the
// context-full finish comes at the same token), max_tokens of 1 and 2, prompt
// chunks of 5 in steps of 11, a pool of 40 blocks with and without swap,
// logits read back for every row (no fed tokens: only steps of prompt chunks
// are planned ahead), and padded decode steps. Every output and finish reason is that of a single
// run, callers that stop after two tokens get those two, and every block comes back.
TEST_P(ServingRandomModelTest, StepOverlapAtTheContextEndAndTheOptionsEdges) {
  struct Request {
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  uint32_t state = 99;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int32_t>((state >> 8) % 250u) + 3;
  };
  const int lengths[] = {240, 250, 254, 10, 200, 255, 3, 128, 60, 245, 30, 251};
  const int max_tokens[] = {40, 1, 5, 1, 2, 7, 3, 200, 1, 100, 2, 9};
  std::vector<Request> requests;
  for (size_t i = 0; i < std::size(lengths); ++i) {
    std::vector<int32_t> prompt{1};
    for (int j = 1; j < lengths[i]; ++j) prompt.push_back(next());
    SamplingParams p = Greedy(max_tokens[i]);
    if (i % 3 == 1) {
      p.greedy = false;
      p.temperature = 1.1f;
      p.seed = 7 + i;
    }
    requests.push_back({prompt, p});
  }
  ServingOptions single_opts;
  single_opts.max_running = 1;
  single_opts.prefix_cache = false;
  single_opts.speculative_draft_tokens = 0;
  auto single = Load(single_opts);
  ASSERT_NE(single, nullptr);
  std::vector<std::vector<int32_t>> expected;
  std::vector<FinishReason> reasons;
  for (const Request& r : requests) {
    auto g = single->Generate(r.prompt, r.params, nullptr);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    expected.push_back(Ids(*g));
    reasons.push_back(g->finish_reason);
  }
  ASSERT_NE(std::find(reasons.begin(), reasons.end(), FinishReason::kContextFull), reasons.end());

  struct Case {
    const char* name;
    ServingOptions options;
  };
  std::vector<Case> cases(4);
  for (Case& c : cases) {
    c.options.overlap_steps_always = true;
    c.options.speculative_draft_tokens = 0;
    c.options.prefill_chunk = 5;
    c.options.step_tokens = 11;
    c.options.n_blocks = 40;
  }
  cases[0].name = "short chunks, 40 blocks";
  cases[1].name = "short chunks, 40 blocks, swap";
  cases[1].options.swap_space_mib = 16;
  cases[2].name = "logits read back";
  cases[2].options.device_sampling = false;
  cases[3].name = "padded decode steps, long chunks";
  cases[3].options.pad_decode_steps = true;
  cases[3].options.prefill_chunk = 64;
  cases[3].options.step_tokens = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto engine = Load(c.options);
    ASSERT_NE(engine, nullptr);
    for (const int stop_after : {0, 2}) {
      std::vector<std::thread> threads;
      for (size_t i = 0; i < requests.size(); ++i) {
        threads.emplace_back([&, i] {
          int seen = 0;
          auto g = engine->Generate(
              requests[i].prompt, requests[i].params,
              [&](const GeneratedToken&) { return stop_after == 0 || ++seen < stop_after; });
          ASSERT_TRUE(g.ok()) << g.status().ToString();
          if (stop_after == 0) {
            EXPECT_EQ(Ids(*g), expected[i]) << i;
            EXPECT_EQ(g->finish_reason, reasons[i]) << i;
          } else {
            const size_t n = std::min<size_t>(stop_after, expected[i].size());
            EXPECT_EQ(Ids(*g), std::vector<int32_t>(expected[i].begin(), expected[i].begin() + n))
                << i;
          }
        });
      }
      for (auto& t : threads) t.join();
    }
    const ServingStats stats = StatsOnceFree(*engine, c.options.n_blocks);
    EXPECT_EQ(stats.swap_slots_used, 0);
    // With logits read back only steps of prompt chunks (no tokens) go ahead.
    EXPECT_GT(stats.overlapped_steps, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ServingRandomModelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

TEST(ServingStories260K, GreedyTextMatchesTheReferenceWhileBatched) {
  SKIP_WITHOUT_TEST_DEVICE();
  const std::string path = testutil::Stories260KPath();
  EngineOptions eo = testing::ServingTestEngineOptions(2);
  auto engine = ServingEngine::Load(path, eo, ServingOptions{});
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
  for (size_t i = 1; i < prompts.size(); ++i) {
    auto r = (*engine)->engine().Generate(prompts[i], Greedy(64), nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(out[i], Ids(*r)) << "prompt " << i;
  }
}

TEST(ServingStories260K, OverloadIsRefusedAndCallbacksStop) {
  SKIP_WITHOUT_TEST_DEVICE();
  EngineOptions eo = testing::ServingTestEngineOptions(1);
  ServingOptions so;
  so.max_waiting = 0;  // nothing may wait: every request is refused
  auto engine = ServingEngine::Load(testutil::Stories260KPath(), eo, so);
  ASSERT_TRUE(engine.ok());
  auto r = (*engine)->Generate({1, 20, 30}, Greedy(4), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  auto ok_engine = ServingEngine::Load(testutil::Stories260KPath(), eo, ServingOptions{});
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
