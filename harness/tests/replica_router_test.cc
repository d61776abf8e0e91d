// The model replica router (src/replica_router.h): homes by consistent hashing, the load
// bound, failover and recovery, the config that turns it on, and both HTTP model clients
// routing over two replicas (src/replica_routing.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "replica_router.h"
#include "sinew/harness/config.h"
#include "sinew/harness/model_client.h"
#include "test_util.h"

namespace sinew::harness {
namespace {

const std::vector<std::string> kThree = {"http://a:1/v1", "http://b:1/v1", "http://c:1/v1"};

std::string Key(int i) { return "s-" + std::to_string(i) + "-0f3a"; }

TEST(ReplicaRouterTest, ASessionAlwaysGoesHomeAndHomesSpreadOverReplicas) {
  ReplicaRouter router(kThree);
  std::map<size_t, int> homes;
  for (int i = 0; i < 3000; ++i) {
    const size_t home = router.HomeOf(Key(i));
    ++homes[home];
    for (int again = 0; again < 2; ++again) {
      auto call = router.Pick(Key(i));
      EXPECT_EQ(call.replica(), home);
      EXPECT_EQ(call.choice(), ReplicaRouter::Choice::kHome);
      EXPECT_EQ(call.url(), kThree[home]);
      call.Succeeded();
    }
  }
  ASSERT_EQ(homes.size(), 3u);
  for (const auto& [replica, n] : homes) {
    EXPECT_GT(n, 600) << kThree[replica];  // a third is 1000
    EXPECT_LT(n, 1400) << kThree[replica];
  }
}

TEST(ReplicaRouterTest, AddingAReplicaMovesOnlySessionsToIt) {
  ReplicaRouter three(kThree);
  std::vector<std::string> four = kThree;
  four.push_back("http://d:1/v1");
  ReplicaRouter more(four);
  int moved = 0;
  for (int i = 0; i < 4000; ++i) {
    const size_t before = three.HomeOf(Key(i));
    const size_t after = more.HomeOf(Key(i));
    if (before == after) continue;
    ++moved;
    EXPECT_EQ(after, 3u) << "a session moved between old replicas: " << Key(i);
  }
  EXPECT_GT(moved, 600);   // a quarter is 1000
  EXPECT_LT(moved, 1400);
}

TEST(ReplicaRouterTest, NoReplicaTakesMoreThanTheLoadBound) {
  ReplicaRouter::Options options;
  options.load_factor = 1.25;
  options.min_in_flight = 2;
  ReplicaRouter router(kThree, options);
  std::vector<ReplicaRouter::Call> open;
  const size_t home = router.HomeOf(Key(7));
  for (int n = 0; n < 12; ++n) {
    // Every call is the same session's: only the bound moves them off its home.
    const auto bound = std::max(2u, static_cast<uint32_t>(std::ceil(1.25 * (n + 1) / 3.0)));
    open.push_back(router.Pick(Key(7)));
    for (const auto& r : router.Snapshot()) EXPECT_LE(r.in_flight, bound) << "after call " << n;
  }
  EXPECT_EQ(open[1].choice(), ReplicaRouter::Choice::kHome) << "two calls are under min_in_flight";
  const auto state = router.Snapshot();
  EXPECT_EQ(state[home].in_flight, 5u);  // ceil(1.25 * 12 / 3)
  uint64_t moved = 0;
  for (const auto& r : state) moved += r.moved_in;
  EXPECT_EQ(moved, 12u - state[home].calls);
  for (const auto& call : open) {
    EXPECT_EQ(call.choice() == ReplicaRouter::Choice::kHome, call.replica() == home);
  }
  open.clear();  // ended without an answer (cancelled): slots free, health untouched
  for (const auto& r : router.Snapshot()) {
    EXPECT_EQ(r.in_flight, 0u);
    EXPECT_TRUE(r.up);
    EXPECT_EQ(r.failures, 0u);
  }
}

TEST(ReplicaRouterTest, AFailedReplicaIsSkippedThenProbedAndComesBackOnSuccess) {
  auto now = ReplicaRouter::Clock::time_point() + std::chrono::hours(1);
  ReplicaRouter::Options options;
  options.first_down = std::chrono::milliseconds(200);
  options.clock = [&now] { return now; };
  ReplicaRouter router(kThree, options);
  const std::string key = Key(3);
  const size_t home = router.HomeOf(key);
  router.Pick(key).Failed();
  auto state = router.Snapshot();
  EXPECT_FALSE(state[home].up);
  EXPECT_EQ(state[home].failures, 1u);
  std::optional<size_t> elsewhere;
  {
    auto call = router.Pick(key);
    EXPECT_NE(call.replica(), home);
    EXPECT_EQ(call.choice(), ReplicaRouter::Choice::kDown);
    elsewhere = call.replica();
    call.Succeeded();
  }
  EXPECT_EQ(router.Pick(key).replica(), *elsewhere) << "the next replica on the ring, every time";
  now += std::chrono::milliseconds(200);
  auto probe = router.Pick(key);  // its down time is over: the home is tried again
  EXPECT_EQ(probe.replica(), home);
  probe.Failed();  // still failing: down twice as long
  EXPECT_FALSE(router.Snapshot()[home].up);
  now += std::chrono::milliseconds(399);
  EXPECT_NE(router.Pick(key).replica(), home) << "down for 400 ms after the second failure";
  now += std::chrono::milliseconds(1);
  auto back = router.Pick(key);
  EXPECT_EQ(back.replica(), home);
  back.Succeeded();
  EXPECT_TRUE(router.Snapshot()[home].up);
  EXPECT_EQ(router.Pick(key).choice(), ReplicaRouter::Choice::kHome);
}

TEST(ReplicaRouterTest, AFailedHealthCheckTakesAReplicaOutBeforeAnyCallAndAPassingOneBringsItBack) {
  auto now = ReplicaRouter::Clock::time_point() + std::chrono::hours(1);
  ReplicaRouter::Options options;
  options.clock = [&now] { return now; };
  ReplicaRouter router(kThree, options);
  const std::string key = Key(5);
  const size_t home = router.HomeOf(key);
  router.HealthChecked(home, false);
  auto state = router.Snapshot();
  EXPECT_FALSE(state[home].up);
  EXPECT_EQ(state[home].health_checks, 1u);
  EXPECT_EQ(state[home].health_check_failures, 1u);
  EXPECT_EQ(state[home].calls, 0u);  // no session's call had to fail to find it
  {
    auto call = router.Pick(key);
    EXPECT_NE(call.replica(), home);
    EXPECT_EQ(call.choice(), ReplicaRouter::Choice::kDown);
  }
  // Back as soon as a check passes, long before its down time (1 s) is over.
  now += std::chrono::milliseconds(10);
  router.HealthChecked(home, true);
  EXPECT_TRUE(router.Snapshot()[home].up);
  auto call = router.Pick(key);
  EXPECT_EQ(call.replica(), home);
  EXPECT_EQ(call.choice(), ReplicaRouter::Choice::kHome);
  const std::string metrics = router.MetricsText("m");
  EXPECT_NE(metrics.find("sinew_harness_model_replica_health_checks_total{model=\"m\",replica=\"" + kThree[home] +
                         "\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sinew_harness_model_replica_health_check_failures_total{model=\"m\",replica=\"" +
                         kThree[home] + "\"} 1"),
            std::string::npos)
      << metrics;
}

TEST(ReplicaRouterTest, WhenEveryReplicaIsDownTheCallGoesHomeAsAProbe) {
  ReplicaRouter router(kThree);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 100; ++k) {
      if (router.HomeOf(Key(k)) == static_cast<size_t>(i)) {
        router.Pick(Key(k)).Failed();
        break;
      }
    }
  }
  for (const auto& r : router.Snapshot()) EXPECT_FALSE(r.up);
  auto call = router.Pick(Key(11));
  EXPECT_EQ(call.replica(), router.HomeOf(Key(11)));
  EXPECT_EQ(call.choice(), ReplicaRouter::Choice::kAllDown);
}

TEST(ReplicaRouterTest, RoundRobinTheBaselineTakesTurnsOverReplicasThatAreUp) {
  ReplicaRouter::Options options;
  options.round_robin = true;
  ReplicaRouter router(kThree, options);
  std::vector<size_t> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(router.Pick(Key(1)).replica());
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
  router.Pick(Key(1)).Failed();  // replica 0
  seen.clear();
  for (int i = 0; i < 4; ++i) seen.push_back(router.Pick(Key(1)).replica());
  EXPECT_EQ(seen, (std::vector<size_t>{1, 2, 1, 2}));
}

TEST(ReplicaConfigTest, ReplicasReplaceBaseUrlOnHttpModels) {
  auto with = [](const std::string& model) {
    return ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"}, "models": {"m": )" + model + "}}");
  };
  auto ok = with(R"({"kind": "openai", "replicas": ["http://a:1/v1", "https://b:2/v1"], "replica_load_factor": 1.5})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->models.at("m").replicas, (std::vector<std::string>{"http://a:1/v1", "https://b:2/v1"}));
  EXPECT_EQ(ok->models.at("m").replica_load_factor, 1.5);
  EXPECT_EQ(ok->models.at("m").replica_health_check_ms, 5000u);
  EXPECT_EQ(ok->models.at("m").replica_health_path, "/health");
  const std::pair<const char*, const char*> bad[] = {
      {R"({"kind": "openai", "base_url": "http://a:1/v1", "replicas": ["http://b:1/v1"]})", "not both"},
      {R"({"kind": "openai", "replicas": []})", "must not be empty"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1", "http://a:1/v1"]})", "replicas[1] repeats"},
      {R"({"kind": "openai", "replicas": ["a:1"]})", "replicas[0] must be an http"},
      {R"({"kind": "openai", "replicas": [7]})", "replicas[0] must be a string"},
      {R"({"kind": "scripted", "script": "s.json", "replicas": ["http://a:1/v1"]})", "openai\" and \"anthropic"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1"], "replica_load_factor": 0.5})", "replica_load_factor"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1"], "replica_policy": "random"})", "replica_policy"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1"], "replica_health_check_ms": 50})", "replica_health_check_ms"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1"], "replica_health_path": "health"})", "replica_health_path"},
      {R"({"kind": "openai", "replicas": ["http://a:1/v1"], "replica_health_path": "/h?x"})", "replica_health_path"},
  };
  for (const auto& [model, message] : bad) {
    auto r = with(model);
    ASSERT_FALSE(r.ok()) << model;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("config.models.m"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace sinew::harness

namespace sinew::harness {
namespace {

// A model client of either protocol with two replicas, each a server in the test: a
// session's calls go to its home replica, and when the home fails (502) its retry goes to the
// other replica, which answers; the home is then reported down. Health checks are off,
// so only calls reach the servers.
class ReplicaFailoverTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One streamed answer "ok" in the protocol under test.
  static std::string Answer(const std::string& kind) {
    if (kind == "anthropic") {
      return "event: content_block_delta\ndata: "
             R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}})"
             "\n\nevent: message_delta\ndata: "
             R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}})"
             "\n\n";
    }
    return "data: " R"({"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]})"
           "\n\ndata: [DONE]\n\n";
  }
};

TEST_P(ReplicaFailoverTest, ASessionStaysHomeAndItsRetryMovesToTheOtherReplicaWhenHomeFails) {
  const std::string kind = GetParam();
  std::atomic<bool> failing[2] = {false, false};
  auto handler = [&](int i) {
    return [&, i](const test::TestHttpServer::Request&) {
      test::TestHttpServer::Response r;
      if (failing[i]) {
        // 502: a 503 from this server would carry Retry-After: 1, and the retry would wait
        // until the home's first down time is over.
        r.status = 502;
        r.body = R"({"error":{"message":"replica is down"}})";
        return r;
      }
      r.content_type = "text/event-stream";
      r.body = Answer(kind);
      return r;
    };
  };
  test::TestHttpServer a(handler(0)), b(handler(1));
  test::TestHttpServer* servers[2] = {&a, &b};
  ModelEndpointConfig config;
  config.kind = kind;
  config.model = "m";
  config.replicas = {a.url() + "/v1", b.url() + "/v1"};
  config.replica_health_check_ms = 0;
  config.backoff_ms = 1;
  config.max_retries = 2;
  config.timeout_seconds = 5;
  auto client = MakeModelClient(config, "key");
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  ModelCall call;
  call.model = "m";
  call.session_id = "session-failover";
  ChatMessage user;
  user.text = "hi";
  call.messages = {user};
  for (int i = 0; i < 3; ++i) {
    auto reply = (*client)->Complete(call, nullptr);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->text, "ok");
  }
  const size_t home = a.requests().size() == 3 ? 0 : 1;
  const size_t other = 1 - home;
  ASSERT_EQ(servers[home]->requests().size(), 3u) << "the session's calls did not all go to one replica";
  ASSERT_EQ(servers[other]->requests().size(), 0u);
  EXPECT_EQ(servers[home]->requests()[0].target, kind == "anthropic" ? "/v1/messages" : "/v1/chat/completions");

  failing[home] = true;
  auto reply = (*client)->Complete(call, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->text, "ok");
  EXPECT_EQ(reply->attempts, 2u);
  EXPECT_EQ(servers[home]->requests().size(), 4u);
  EXPECT_EQ(servers[other]->requests().size(), 1u);
  const std::string metrics = (*client)->MetricsText("m");
  EXPECT_NE(metrics.find("sinew_harness_model_replica_up{model=\"m\",replica=\"" + config.replicas[home] + "\"} 0"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sinew_harness_model_replica_up{model=\"m\",replica=\"" + config.replicas[other] + "\"} 1"),
            std::string::npos)
      << metrics;
}

INSTANTIATE_TEST_SUITE_P(BothProtocols, ReplicaFailoverTest, ::testing::Values("openai", "anthropic"));

}  // namespace
}  // namespace sinew::harness
