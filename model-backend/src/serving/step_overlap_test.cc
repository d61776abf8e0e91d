// Step overlap (ServingOptions::overlap_steps): the scheduler plans and
// queues step N+1 before step N's tokens reach the host. Outputs against single
// runs, blocks freed, and the edges of the options. On the CPU the overlap is
// forced (overlap_steps_always); a GPU overlaps by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>
#include <thread>

#include "random_model.h"
#include "random_model_fixture.h"
#include "serving_test_device.h"
#include "serving_test_util.h"
#include "sinew/model/serving.h"

namespace sinew::model {
namespace {

using testing::Greedy;
using testing::Ids;
using testing::MakePrompts;

class StepOverlapTest : public RandomServingModelTest {
 protected:
  StepOverlapTest() : RandomServingModelTest(256, 7, "sinew_step_overlap_") {}
};

// Step overlap: step N+1 is planned and queued before step N's tokens reach
// the host, reading them where the backend left them, and sequences that step
// N finishes have their row in step N+1 dropped. Greedy and seeded sampled
// requests of different lengths, some stopping at EOS, chunked prompts with a
// prefix cache, then a pool so small that planning ahead must give way to
// preemption, then requests cancelled mid-stream and requests sampled on the
// host (penalties) among them: every output is that of a single run, every
// block comes back, and steps did overlap. On the CPU the overlap is forced
// (overlap_steps_always); a GPU overlaps by default.
TEST_P(StepOverlapTest, StepOverlapChangesNothingAndFreesEverything) {
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

  // Without the option, the CPU never overlaps; a backend that queues its
  // work (CUDA) overlaps by default.
  ServingOptions plain_opts = overlap_opts;
  plain_opts.overlap_steps_always = false;
  auto plain = Load(plain_opts);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(run(*plain, requests), expected);
  if (std::string_view(testing::kServingTestDevice) == "cpu") {
    EXPECT_EQ(plain->stats().overlapped_steps, 0u);
  } else {
    EXPECT_GT(plain->stats().overlapped_steps, 0u);
  }

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
TEST_P(StepOverlapTest, StepOverlapAtTheContextEndAndTheOptionsEdges) {
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

INSTANTIATE_TEST_SUITE_P(Types, StepOverlapTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K));

}  // namespace
}  // namespace sinew::model
