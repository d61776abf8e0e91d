// Unit tests of the eval library: statistics against published values, the task format,
// resource configurations, the journal, and results.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sinew/eval/job.h"
#include "sinew/eval/report.h"
#include "sinew/eval/resource_config.h"
#include "sinew/eval/stats.h"
#include "sinew/eval/task.h"
#include "sinew/testing/subprocess.h"

namespace sinew::eval {
namespace {
namespace fs = std::filesystem;

// Newcombe, "Two-sided confidence intervals for the single proportion" (Stat Med 1998),
// Table I, method 3 (Wilson score): 81/263 -> 0.2553-0.3662; 0/10 -> 0-0.2775;
// 1/29 -> 0.0061-0.1718.
TEST(Stats, WilsonMatchesNewcombe1998) {
  Interval a = Wilson95(81, 263);
  EXPECT_NEAR(a.low, 0.2553, 5e-5);
  EXPECT_NEAR(a.high, 0.3662, 5e-5);
  Interval b = Wilson95(0, 10);
  EXPECT_NEAR(b.low, 0.0, 1e-12);
  EXPECT_NEAR(b.high, 0.2775, 5e-5);
  Interval c = Wilson95(1, 29);
  EXPECT_NEAR(c.low, 0.0061, 5e-5);
  EXPECT_NEAR(c.high, 0.1718, 5e-5);
  Interval none = Wilson95(0, 0);
  EXPECT_EQ(none.low, 0);
  EXPECT_EQ(none.high, 1);
}

// pass@k = 1 - C(n-c, k) / C(n, k), worked by hand.
TEST(Stats, PassAtKUnbiasedEstimator) {
  EXPECT_NEAR(PassAtK(10, 3, 1), 0.3, 1e-12);              // c/n
  EXPECT_NEAR(PassAtK(10, 3, 2), 1 - 21.0 / 45.0, 1e-12);  // 1 - C(7,2)/C(10,2)
  EXPECT_NEAR(PassAtK(5, 2, 3), 1 - 1.0 / 10.0, 1e-12);    // 1 - C(3,3)/C(5,3)
  EXPECT_EQ(PassAtK(5, 0, 5), 0.0);
  EXPECT_EQ(PassAtK(5, 1, 5), 1.0);
  EXPECT_EQ(PassAtK(4, 3, 2), 1.0);  // n - c < k
}

// Exact McNemar: p = 2 * P(X <= min(b, c)), X ~ Bin(b + c, 1/2).
TEST(Stats, McNemarExact) {
  EXPECT_NEAR(McNemarExactP(1, 7), 2 * (1 + 8) / 256.0, 1e-12);  // 0.0703125
  EXPECT_NEAR(McNemarExactP(0, 5), 2 / 32.0, 1e-12);             // 0.0625
  EXPECT_NEAR(McNemarExactP(0, 6), 2 / 64.0, 1e-12);             // 0.03125
  EXPECT_EQ(McNemarExactP(3, 3), 1.0);
  EXPECT_EQ(McNemarExactP(0, 0), 1.0);
  // Large: b=10, c=30 -> 0.0022214 (sum_{i<=10} C(40,i) / 2^39).
  EXPECT_NEAR(McNemarExactP(10, 30), 0.0022214, 5e-7);
}

TEST(Stats, PairedComparisonCountsAndDirection) {
  std::vector<std::pair<bool, bool>> pairs = {{false, true}, {false, true}, {false, true},
                                              {false, true}, {false, true}, {false, true},
                                              {true, true},  {false, false}};
  PairedComparison c = ComparePaired(pairs);
  EXPECT_EQ(c.pairs, 8u);
  EXPECT_EQ(c.only_a, 0u);
  EXPECT_EQ(c.only_b, 6u);
  EXPECT_NEAR(c.difference, 0.75, 1e-12);
  EXPECT_NEAR(c.p_value, 0.03125, 1e-12);
  EXPECT_LT(c.interval_95.low, 0.75);
  EXPECT_GT(c.interval_95.high, 0.75);
}

// Paired bootstrap, checked by hand: two pairs whose B-minus-A differences are 1 and 0.
// A resample of two draws has mean 0 (both draws the tie: 1/4), 1/2 (1/2) or 1 (1/4), so
// the 95% percentile interval is [0, 1] and p = 2 * min(P(<= 0), P(>= 0)) = 2 * 1/4.
TEST(Stats, PairedBootstrapHandCheckedCases) {
  const std::vector<std::pair<bool, bool>> two = {{false, true}, {true, true}};
  BootstrapResult r = PairedBootstrap(two, 20000, 7);
  EXPECT_EQ(r.interval_95.low, 0.0);
  EXPECT_EQ(r.interval_95.high, 1.0);
  EXPECT_NEAR(r.p_value, 0.5, 0.03);  // 0.5 +- about 3.5 standard errors of 20000 draws
  EXPECT_EQ(r.resamples, 20000u);
  EXPECT_EQ(r.seed, 7u);

  // No disagreement: every resample is 0.
  BootstrapResult same = PairedBootstrap({{true, true}, {false, false}, {true, true}});
  EXPECT_EQ(same.interval_95.low, 0.0);
  EXPECT_EQ(same.interval_95.high, 0.0);
  EXPECT_EQ(same.p_value, 1.0);
  // B always wins: every resample is 1, p below 1/resamples.
  BootstrapResult wins = PairedBootstrap(std::vector<std::pair<bool, bool>>(5, {false, true}));
  EXPECT_EQ(wins.interval_95.low, 1.0);
  EXPECT_EQ(wins.interval_95.high, 1.0);
  EXPECT_EQ(wins.p_value, 0.0);
  // No pairs: nothing known.
  BootstrapResult none = PairedBootstrap({});
  EXPECT_EQ(none.interval_95.low, -1.0);
  EXPECT_EQ(none.interval_95.high, 1.0);
  EXPECT_EQ(none.p_value, 1.0);
}

TEST(Stats, PairedBootstrapIsReproducibleAndAgreesWithTheExactTest) {
  // 100 pairs: 10 only A, 30 only B, 60 ties (exact McNemar p = 0.0022, difference +0.20).
  std::vector<std::pair<bool, bool>> pairs;
  for (int i = 0; i < 10; ++i) pairs.emplace_back(true, false);
  for (int i = 0; i < 30; ++i) pairs.emplace_back(false, true);
  for (int i = 0; i < 30; ++i) pairs.emplace_back(true, true);
  for (int i = 0; i < 30; ++i) pairs.emplace_back(false, false);
  BootstrapResult a = PairedBootstrap(pairs);
  BootstrapResult b = PairedBootstrap(pairs);
  EXPECT_EQ(a.interval_95.low, b.interval_95.low);  // same seed, same numbers
  EXPECT_EQ(a.interval_95.high, b.interval_95.high);
  EXPECT_EQ(a.p_value, b.p_value);
  EXPECT_EQ(a.seed, kBootstrapSeed);
  // The same draws with A and B swapped: the interval mirrors exactly.
  std::vector<std::pair<bool, bool>> swapped;
  for (const auto& [x, y] : pairs) swapped.emplace_back(y, x);
  BootstrapResult m = PairedBootstrap(swapped);
  EXPECT_DOUBLE_EQ(m.interval_95.low, -a.interval_95.high);
  EXPECT_DOUBLE_EQ(m.interval_95.high, -a.interval_95.low);
  EXPECT_EQ(m.p_value, a.p_value);
  // Close to the paired Wald interval of ComparePaired (+0.20 +- 0.117) and significant.
  PairedComparison c = ComparePaired(pairs);
  EXPECT_NEAR(a.interval_95.low, c.interval_95.low, 0.03);
  EXPECT_NEAR(a.interval_95.high, c.interval_95.high, 0.03);
  EXPECT_LT(a.p_value, 0.01);
  EXPECT_GT(a.interval_95.low, 0.0);
}

TEST(Stats, QuantileLinear) {
  EXPECT_EQ(Quantile({}, 0.5), 0);
  EXPECT_NEAR(Quantile({1, 2, 3, 4}, 0.5), 2.5, 1e-12);
  EXPECT_NEAR(Quantile({10, 1, 5}, 0.95), 9.5, 1e-12);
  EXPECT_NEAR(Mean({1, 2, 3}), 2, 1e-12);
}

TEST(ResourceConfig, Presets) {
  Task t;
  t.memory_mb = 256;
  t.cpus = 1;
  auto one = ParseResourceConfig("1x");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->name, "1x");
  SandboxShape s = ResolveShape(*one, t);
  EXPECT_EQ(s.memory_guaranteed_bytes, 256ull << 20);
  EXPECT_EQ(s.memory_limit_bytes, 256ull << 20);
  EXPECT_EQ(s.cpu_millicores, 1000u);
  auto split = ParseResourceConfig("g1x-c3x");
  ASSERT_TRUE(split.ok());
  s = ResolveShape(*split, t);
  EXPECT_EQ(s.memory_guaranteed_bytes, 256ull << 20);
  EXPECT_EQ(s.memory_limit_bytes, 768ull << 20);
  EXPECT_EQ(s.cpu_millicores, 3000u);
  auto unc = ParseResourceConfig("uncapped");
  ASSERT_TRUE(unc.ok());
  s = ResolveShape(*unc, t);
  EXPECT_EQ(s.memory_limit_bytes, 16ull << 30);
  EXPECT_EQ(s.memory_guaranteed_bytes, 256ull << 20);
}

TEST(ResourceConfig, NamedAbsoluteAndErrors) {
  auto c = ParseResourceConfig("tight=guarantee=1g,ceiling=2g,cpus=1.5,pids=100");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "tight");
  Task t;
  SandboxShape s = ResolveShape(*c, t);
  EXPECT_EQ(s.memory_guaranteed_bytes, 1ull << 30);
  EXPECT_EQ(s.memory_limit_bytes, 2ull << 30);
  EXPECT_EQ(s.cpu_millicores, 1500u);
  EXPECT_EQ(s.pids_limit, 100u);
  auto mixed = ParseResourceConfig("m=guarantee=1x,ceiling=512m");
  ASSERT_TRUE(mixed.ok());
  t.memory_mb = 1024;
  s = ResolveShape(*mixed, t);
  EXPECT_EQ(s.memory_limit_bytes, 512ull << 20);
  EXPECT_EQ(s.memory_guaranteed_bytes, 512ull << 20);  // lowered to the ceiling
  for (const char* bad : {"2y", "x=", "x=guarantee", "x=guarantee=2g,ceiling=1g", "x=foo=1",
                          "x=cpus=-1", "x=pids=5", "bad name=1x", "g3x-c1x"}) {
    auto r = ParseResourceConfig(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--config"), std::string::npos) << r.status().message();
  }
}

class TaskFormat : public ::testing::Test {
 protected:
  void SetUp() override { root_ = tmp_.path(); }
  std::string MakeTask(const std::string& name, const std::string& toml) {
    fs::path d = fs::path(root_) / name;
    fs::create_directories(d / "solution");
    fs::create_directories(d / "tests");
    std::ofstream(d / "instruction.md") << "Do the thing.\n";
    std::ofstream(d / "task.toml") << toml;
    std::ofstream(d / "solution/solve.sh") << "true\n";
    std::ofstream(d / "tests/test.sh") << "echo 1 > /logs/verifier/reward.txt\n";
    return d.string();
  }
  testing::TempDir tmp_{"eval-task"};
  std::string root_;
};

TEST_F(TaskFormat, ParsesEveryField) {
  std::string dir = MakeTask("t1", R"(version = "1.0"
[metadata]
name = "renamed"
difficulty = "easy"
tags = ["a", "b"]
colour = "red"
[agent]
timeout_sec = 30
[verifier]
timeout_sec = 12.5
[environment]
cpus = 2
memory_mb = 300
storage_mb = 64
image = "default"
allow_internet = false
)");
  std::vector<std::string> warnings;
  auto t = LoadTask(dir, &warnings);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->name, "renamed");
  EXPECT_EQ(t->difficulty, "easy");
  EXPECT_EQ(t->tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t->agent_timeout_sec, 30);
  EXPECT_EQ(t->verifier_timeout_sec, 12.5);
  EXPECT_EQ(t->cpus, 2);
  EXPECT_EQ(t->memory_mb, 300u);
  EXPECT_EQ(t->storage_mb, 64u);
  EXPECT_FALSE(t->has_setup);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("[metadata] colour"), std::string::npos) << warnings[0];
}

TEST_F(TaskFormat, ErrorsNameTheProblem) {
  std::vector<std::string> w;
  std::string dir = MakeTask("net", "[environment]\nallow_internet = true\n");
  auto t = LoadTask(dir, &w);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("allow_internet"), std::string::npos);

  dir = MakeTask("bad", "[environment\ncpus = 1\n");
  t = LoadTask(dir, &w);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("task.toml"), std::string::npos);

  dir = MakeTask("type", "[environment]\nmemory_mb = \"lots\"\n");
  t = LoadTask(dir, &w);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("memory_mb"), std::string::npos);

  dir = MakeTask("missing", "");
  fs::remove(fs::path(dir) / "tests/test.sh");
  t = LoadTask(dir, &w);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tests/test.sh"), std::string::npos);
}

TEST_F(TaskFormat, SuiteSelectsByGlob) {
  MakeTask("alpha", "");
  MakeTask("beta", "");
  MakeTask("alps", "");
  std::vector<std::string> w;
  auto all = LoadSuite(root_, "", &w);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "alpha");
  auto some = LoadSuite(root_, "al*", &w);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->size(), 2u);
  auto none = LoadSuite(root_, "zeta*", &w);
  EXPECT_FALSE(none.ok());
}

TEST(Journal, SurvivesATornLineAndReportsOpenAttempts) {
  testing::TempDir tmp("eval-journal");
  TrialKey k{"t", "1x", 1};
  {
    auto j = Journal::Open(tmp.path());
    ASSERT_TRUE(j.ok());
    boost::json::object start = KeyJson(k, 1);
    start["type"] = "start";
    ASSERT_TRUE((*j)->Append(start).ok());
    TrialRecord r;
    r.key = k;
    r.attempt = 1;
    r.outcome = kPassed;
    r.reward = 1.0;
    boost::json::object end = r.ToJson();
    end["type"] = "end";
    ASSERT_TRUE((*j)->Append(end).ok());
    boost::json::object start2 = KeyJson(TrialKey{"t", "1x", 2}, 1);
    start2["type"] = "start";
    ASSERT_TRUE((*j)->Append(start2).ok());
  }
  std::ofstream(tmp.Sub("trials.jsonl"), std::ios::app) << R"({"type":"end","task":"t)";
  auto j = Journal::Open(tmp.path());
  ASSERT_TRUE(j.ok());
  auto ended = (*j)->Ended();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].outcome, kPassed);
  EXPECT_EQ(*ended[0].reward, 1.0);
  auto open = (*j)->Unfinished();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].key.trial, 2u);
  // Appending after a torn line starts a clean line.
  boost::json::object start3 = KeyJson(TrialKey{"t", "1x", 3}, 1);
  start3["type"] = "start";
  ASSERT_TRUE((*j)->Append(start3).ok());
  auto again = Journal::Open(tmp.path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Unfinished().size(), 2u);
}

TEST(Results, SummaryAndComparison) {
  ReportInput in;
  in.spec.suite = "/s";
  in.spec.agent = "oracle";
  in.spec.trials = 2;
  in.spec.configs = {"1x", "g1x-c3x"};
  in.tasks = {"a", "b"};
  in.configs = {"1x", "g1x-c3x"};
  auto add = [&](std::string task, std::string config, uint32_t trial, uint32_t attempt,
                 const char* outcome) {
    TrialRecord r;
    r.key = {task, config, trial};
    r.attempt = attempt;
    r.outcome = outcome;
    r.total_ms = 1000;
    in.attempts.push_back(r);
  };
  add("a", "1x", 1, 1, kInfraError);
  add("a", "1x", 1, 2, kInfraError);
  add("a", "1x", 2, 1, kPassed);
  add("b", "1x", 1, 1, kFailed);
  add("b", "1x", 2, 1, kPassed);
  add("a", "g1x-c3x", 1, 1, kPassed);
  add("a", "g1x-c3x", 2, 1, kPassed);
  add("b", "g1x-c3x", 1, 1, kPassed);
  add("b", "g1x-c3x", 2, 1, kPassed);
  auto results = BuildResults(in);
  const auto& s1 = results.at("summary").at("1x").as_object();
  EXPECT_EQ(s1.at("n").as_uint64(), 4u);
  EXPECT_EQ(s1.at("passed").as_uint64(), 2u);
  EXPECT_EQ(s1.at("infra_errors").as_uint64(), 1u);
  EXPECT_EQ(s1.at("attempts").as_uint64(), 5u);
  EXPECT_DOUBLE_EQ(s1.at("pass_rate").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(s1.at("pass_at_k").at("1").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(s1.at("pass_at_k").at("2").as_double(), 1.0);
  auto w = Wilson95(2, 4);
  EXPECT_DOUBLE_EQ(s1.at("wilson_95").as_array()[0].as_double(), w.low);
  ASSERT_EQ(results.at("trials").as_array().size(), 9u);
  EXPECT_FALSE(results.at("trials").as_array()[0].at("final").as_bool());
  EXPECT_TRUE(results.at("trials").as_array()[1].at("final").as_bool());
  const auto& cmp = results.at("comparisons").as_array()[0].as_object();
  EXPECT_EQ(cmp.at("pairs").as_uint64(), 4u);
  EXPECT_EQ(cmp.at("only_b_passed").as_uint64(), 2u);
  EXPECT_DOUBLE_EQ(cmp.at("mcnemar_exact_p").as_double(), 0.5);
  // Differences {1, 0, 1, 0}: a resample's mean is k/4 with k ~ Bin(4, 1/2), so the
  // percentile interval is [0, 1] (P(k = 0) = P(k = 4) = 1/16 > 2.5%) and p = 2/16.
  EXPECT_EQ(cmp.at("bootstrap_95").as_array()[0].as_double(), 0.0);
  EXPECT_EQ(cmp.at("bootstrap_95").as_array()[1].as_double(), 1.0);
  EXPECT_NEAR(cmp.at("bootstrap_p").as_double(), 0.125, 0.02);
  EXPECT_EQ(cmp.at("bootstrap_resamples").as_uint64(), kBootstrapResamples);
  EXPECT_EQ(cmp.at("bootstrap_seed").as_uint64(), kBootstrapSeed);
  std::string table = SummaryTable(results);
  EXPECT_NE(table.find("g1x-c3x vs 1x: +50.0 points"), std::string::npos) << table;
  EXPECT_NE(table.find("paired bootstrap (10000 resamples, seed 20261130): [+0.0, +100.0] points"),
            std::string::npos)
      << table;
  std::string html = RenderHtml(results);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no fetches
}

}  // namespace
}  // namespace sinew::eval
