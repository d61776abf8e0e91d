// Model replicas behind the harness's router (src/replica_router.h, docs/scale-out.md):
// three real sinew-model processes serving stories260K, a real store and harness. Each
// session's calls all reach one server (its trace, derived from the session id, shows
// which), the sessions spread over the servers, and when one is killed its sessions go
// on on the others while /metrics reports it down.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <thread>

#include "sinew/trace.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "replicas-key";

struct ModelServer {
  std::unique_ptr<testing::Subprocess> proc;
  std::string url;  // .../v1
};

// The shared stories260K model file.
std::string StoriesGguf() {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  return std::string(source != nullptr ? source : ".") + "/../shared/models/stories260K.gguf";
}

// A sinew-model serving `gguf` on `port` ("0": any free one).
ModelServer StartModel(const std::string& gguf, const std::string& port = "0") {
  ModelServer m;
  m.proc = std::make_unique<testing::Subprocess>(std::vector<std::string>{
      testing::BinaryPath("sinew-model"), "--model", gguf, "--port", port, "--grpc-port", "-1", "--threads", "1",
      "--log-format", "json"});
  auto listening = m.proc->WaitForLine("http listening on", std::chrono::seconds(60));
  if (listening) m.url = "http://" + listening->substr(listening->rfind(' ') + 1) + "/v1";
  return m;
}

// `n` sinew-model servers of stories260K, appended to *models.
void StartModels(int n, std::vector<ModelServer>* models) {
  const std::string gguf = StoriesGguf();
  ASSERT_EQ(access(gguf.c_str(), R_OK), 0) << "no model file at " << gguf;
  for (int i = 0; i < n; ++i) {
    models->push_back(StartModel(gguf));
    ASSERT_FALSE(models->back().url.empty());
  }
}

// `n` sessions of the prompt "Once upon a time" on model "real"; their ids appended to *ids.
void StartStories(const std::string& base, int n, std::vector<std::string>* ids) {
  for (int i = 0; i < n; ++i) {
    auto r = Api("POST", base + "/v1/sessions", kKey, R"({"prompt": "Once upon a time", "model": "real"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids->emplace_back(r.json.at("session").at("id").as_string());
  }
}

// A harness config whose model "real" has `models` as its replicas, plus `model_fields`
// (more fields of that model, each followed by a comma).
std::string ReplicasConfig(const std::string& store_address, const std::vector<ModelServer>& models,
                           const std::string& model_fields) {
  std::string replicas;
  for (const auto& m : models) replicas += (replicas.empty() ? "\"" : ", \"") + m.url + "\"";
  return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_address + R"("},
    "api_keys": {")" + kKey + R"(": "t"},
    "models": {"real": {"kind": "openai", "model": "stories260K", "tools": false, "context_tokens": 256,
                        "max_output_tokens": 8, "backoff_ms": 50, )" + model_fields + R"(
                        "replicas": [)" + replicas + "]}}}";
}

// Trace ids of the requests a server logged since the last read.
std::set<std::string> TracesSeen(ModelServer& m) {
  std::set<std::string> traces;
  for (const auto& line : ReadJsonLines(m.proc.get(), std::chrono::milliseconds(300))) {
    if (Str(line, "msg").find("request started") != std::string::npos) traces.insert(Str(line, "trace_id"));
  }
  return traces;
}

size_t ModelResponses(const std::string& base, const std::string& id) {
  size_t n = 0;
  for (const auto& e : AllEvents(base, kKey, id)) n += e.contains("model_response") ? 1 : 0;
  return n;
}

// Sends a follow-up message and waits until the session answered it and completed.
void FollowUp(const std::string& base, const std::string& id) {
  const size_t before = ModelResponses(base, id);
  auto m = Api("POST", base + "/v1/sessions/" + id + "/messages", kKey, R"({"text": "And then"})");
  ASSERT_EQ(m.status, 202) << m.body;
  for (int i = 0; i < 600 && ModelResponses(base, id) <= before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(WaitForStatus(base, kKey, id, "completed,failed"), "completed");
  EXPECT_EQ(ModelResponses(base, id), before + 1);
}

// The value of `metric{model="real",replica="url"}` in a /metrics body; -1 when absent.
double Metric(const std::string& body, const std::string& metric, const std::string& url) {
  const std::string prefix = metric + "{model=\"real\",replica=\"" + url + "\"} ";
  const size_t at = body.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + prefix.size()));
}

TEST(ModelReplicasTest, SessionsStayOnTheirReplicaAndMoveWhenItDies) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  std::vector<ModelServer> models;
  ASSERT_NO_FATAL_FAILURE(StartModels(3, &models));
  // Health checks off: here the call itself must find the dead replica.
  HarnessProcess harness(dir.Sub("harness.json"),
                         ReplicasConfig(store.address, models,
                                        R"("replica_min_in_flight": 16, "replica_health_check_ms": 0,)"));
  ASSERT_FALSE(harness.address.empty());

  // Ten sessions, two calls each.
  std::vector<std::string> ids;
  ASSERT_NO_FATAL_FAILURE(StartStories(harness.url(), 10, &ids));
  for (const auto& id : ids) ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
  for (const auto& id : ids) FollowUp(harness.url(), id);

  std::map<std::string, std::set<size_t>> servers_of;  // trace -> servers that saw it
  std::vector<std::set<std::string>> seen(models.size());
  for (size_t m = 0; m < models.size(); ++m) {
    seen[m] = TracesSeen(models[m]);
    for (const auto& t : seen[m]) servers_of[t].insert(m);
  }
  std::set<size_t> used;
  std::map<std::string, size_t> home;
  for (const auto& id : ids) {
    const auto& servers = servers_of[TraceIdForSession(id)];
    ASSERT_EQ(servers.size(), 1u) << "session " << id << "'s calls went to " << servers.size() << " servers";
    home[id] = *servers.begin();
    used.insert(*servers.begin());
  }
  EXPECT_GE(used.size(), 2u) << "ten sessions all hashed to one of three replicas";

  // Kill the home of the first session; its next call goes elsewhere and completes.
  const std::string moved = ids.front();
  const size_t dead = home[moved];
  models[dead].proc->Signal(SIGKILL);
  models[dead].proc->Wait();
  FollowUp(harness.url(), moved);
  size_t took_over = models.size();
  for (size_t m = 0; m < models.size(); ++m) {
    if (m != dead && TracesSeen(models[m]).count(TraceIdForSession(moved)) != 0) took_over = m;
  }
  EXPECT_NE(took_over, models.size()) << "no live server answered the moved session";
  // Sessions at home on live servers stay there.
  for (const auto& id : ids) {
    if (home[id] == dead) continue;
    FollowUp(harness.url(), id);
  }
  for (size_t m = 0; m < models.size(); ++m) {
    if (m == dead) continue;
    for (const auto& t : TracesSeen(models[m])) {
      for (const auto& id : ids) {
        if (TraceIdForSession(id) == t && home[id] != dead) {
          EXPECT_EQ(home[id], m) << "session " << id << " moved";
        }
      }
    }
  }

  auto metrics = Call("GET", harness.url() + "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_up", models[dead].url), 0) << metrics.body;
  EXPECT_GE(Metric(metrics.body, "sinew_harness_model_replica_failures_total", models[dead].url), 1);
  EXPECT_GE(Metric(metrics.body, "sinew_harness_model_replica_moved_in_total", models[took_over].url), 1);
  for (size_t m = 0; m < models.size(); ++m) {
    EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_in_flight", models[m].url), 0);
    if (m != dead) {
      EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_up", models[m].url), 1);
    }
  }
  std::printf("replicas test: homes over %zu of 3 servers; server %zu killed; session %s moved to server %zu\n",
              used.size(), dead, moved.c_str(), took_over);
}

// Active health checks (replica_health_check_ms): a replica killed while no session calls
// it is reported down and skipped before any call fails on it, and is back once a server
// answers on its address again.
TEST(ModelReplicasTest, AHealthCheckFindsADeadReplicaBeforeAnyCallAndSeesItReturn) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  std::vector<ModelServer> models;
  ASSERT_NO_FATAL_FAILURE(StartModels(2, &models));
  HarnessProcess harness(dir.Sub("harness.json"),
                         ReplicasConfig(store.address, models, R"("replica_health_check_ms": 200,)"));
  ASSERT_FALSE(harness.address.empty());
  // Polls /metrics until `metric` of replica `url` is `want`; returns the last value.
  auto await_metric = [&](const std::string& metric, const std::string& url, double want) {
    double v = -1;
    for (int i = 0; i < 200; ++i) {
      auto m = Call("GET", harness.url() + "/metrics");
      if (m.status == 200) v = Metric(m.body, metric, url);
      if (v == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return v;
  };
  const std::string dead_url = models[1].url;
  EXPECT_EQ(await_metric("sinew_harness_model_replica_health_checks_total", dead_url, 2), 2);
  EXPECT_EQ(await_metric("sinew_harness_model_replica_up", dead_url, 1), 1);

  models[1].proc->Signal(SIGKILL);
  models[1].proc->Wait();
  EXPECT_EQ(await_metric("sinew_harness_model_replica_up", dead_url, 0), 0) << "the check never saw it die";
  // Sessions made now all go to the live replica; none of their calls tries the dead one.
  for (int i = 0; i < 6; ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "Once upon a time", "model": "real"})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id(r.json.at("session").at("id").as_string());
    EXPECT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
  }
  auto metrics = Call("GET", harness.url() + "/metrics");
  EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_calls_total", dead_url), 0) << metrics.body;
  EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_failures_total", dead_url), 0);
  EXPECT_GE(Metric(metrics.body, "sinew_harness_model_replica_health_check_failures_total", dead_url), 1);
  EXPECT_EQ(Metric(metrics.body, "sinew_harness_model_replica_calls_total", models[0].url), 6);

  // A server on the same address again: the next check brings the replica back.
  const std::string port = dead_url.substr(dead_url.rfind(':') + 1, dead_url.rfind('/') - dead_url.rfind(':') - 1);
  ModelServer again = StartModel(StoriesGguf(), port);
  ASSERT_FALSE(again.url.empty());
  EXPECT_EQ(await_metric("sinew_harness_model_replica_up", dead_url, 1), 1) << "the check never saw it return";
}

// Best-of-n (docs/harness.md, "Forks with their sandbox"): forks of a session call the
// replica their source calls, whose prefix cache holds their shared conversation.
TEST(ModelReplicasTest, ForksCallTheirSourcesReplica) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  std::vector<ModelServer> models;
  ASSERT_NO_FATAL_FAILURE(StartModels(3, &models));
  HarnessProcess harness(dir.Sub("harness.json"),
                         ReplicasConfig(store.address, models,
                                        R"("replica_min_in_flight": 16, "replica_health_check_ms": 0,)"));
  ASSERT_FALSE(harness.address.empty());
  std::vector<std::string> sources;
  ASSERT_NO_FATAL_FAILURE(StartStories(harness.url(), 4, &sources));
  std::map<std::string, std::string> source_of;  // fork -> source
  for (const auto& id : sources) {
    ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
    auto f = Api("POST", harness.url() + "/v1/sessions/" + id + "/fork", kKey,
                 R"({"at_seq": 2, "n": 3, "message": "And then"})");
    ASSERT_EQ(f.status, 201) << f.body;
    for (const auto& s : f.json.at("sessions").as_array()) source_of[std::string(s.at("id").as_string())] = id;
  }
  for (const auto& [fork, source] : source_of) {
    ASSERT_EQ(WaitForStatus(harness.url(), kKey, fork, "completed,failed"), "completed");
  }
  std::map<std::string, std::set<size_t>> servers_of;  // trace -> servers that saw it
  for (size_t m = 0; m < models.size(); ++m) {
    for (const auto& t : TracesSeen(models[m])) servers_of[t].insert(m);
  }
  for (const auto& [fork, source] : source_of) {
    const auto& home = servers_of[TraceIdForSession(source)];
    ASSERT_EQ(home.size(), 1u) << "source " << source;
    EXPECT_EQ(servers_of[TraceIdForSession(fork)], home) << "fork " << fork << " of " << source;
  }
  // By their own ids' hashes, 12 forks on 3 replicas would all meet their sources' with
  // a chance of (1/3)^12.
  EXPECT_EQ(source_of.size(), 12u);
}

}  // namespace
}  // namespace sinew::harness::test
