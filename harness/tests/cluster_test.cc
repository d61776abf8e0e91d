// The cluster (issue 17's test; docs/scale-out.md), all on loopback: one etcd, 3 sandbox
// hosts, 2 store shards, 3 harnesses and 2 model replicas. Sessions make tool calls in
// runc sandboxes while one sandbox host, one harness and one model replica are SIGKILLed
// (the replica is stopped) and etcd is restarted. Then every session has completed, its
// log is whole (seqs 1..n, each tool call with exactly one result), no tool call ran twice
// silently (each call counts its runs in a file of its sandbox), and the shard map is
// intact and still used.
//
// The model replicas are test doubles of an OpenAI-compatible server in their own
// processes (model_double.py): a model that makes two bash calls and then answers, which
// stories260K cannot do on purpose. Each call counts its runs in a file of its sandbox
// (`echo run >> runs; wc -l < runs`): a call that ran twice in one sandbox prints one more
// than its position. Label `long` (runc): SINEW_CLUSTER_SESSIONS sessions, default 100.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/session_store/shard_map.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "cluster-key";
// Small sandboxes: a 2-CPU host has room for 40 of 50 millicores each (placement counts the
// CPU guarantee against the host's capacity; docs/scale-out.md).
constexpr const char* kTask = R"({"prompt": "count", "sandbox": {"cpu_millis": 50, "memory_limit_bytes": 134217728}})";
std::string Str(const json::value& o, const char* key) {
  if (!o.is_object()) return "";
  auto* v = o.as_object().if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

uint64_t Seq(const json::object& e) {
  auto* v = e.if_contains("seq");
  if (v == nullptr) return 0;
  if (v->is_string()) return std::stoull(std::string(v->as_string()));
  return v->to_number<uint64_t>();
}

// What one session's log says; problems are empty when it is whole.
struct Checked {
  std::vector<std::string> problems;
  int calls = 0, lost = 0, interrupted = 0, not_run = 0, resumed = 0;
  std::string not_run_reason;  // the first one
};

Checked CheckLog(const std::vector<json::object>& events) {
  Checked c;
  std::map<std::string, int> results;  // call id -> results
  int expected = 0;                     // runs in the current sandbox so far
  bool slack = false;                   // an interrupted call may have run once
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (Seq(e) != i + 1) c.problems.push_back("event " + std::to_string(i + 1) + " has seq " + std::to_string(Seq(e)));
    if (e.contains("sandbox_provisioned")) {
      expected = 0;
      slack = false;
    }
    if (e.contains("sandbox_lost")) ++c.lost;
    if (e.contains("annotation") && Str(e.at("annotation"), "text").find("resumed") != std::string::npos) ++c.resumed;
    if (e.contains("tool_call")) {
      ++c.calls;
      results[Str(e.at("tool_call"), "call_id")] += 0;
    }
    if (!e.contains("tool_result")) continue;
    const auto& r = e.at("tool_result");
    ++results[Str(r, "call_id")];
    const std::string out = Str(r, "output");
    if (out.find("interrupted") != std::string::npos) {
      ++c.interrupted;
      slack = true;
      continue;
    }
    if (out.find("sandbox was lost") != std::string::npos || out.find("could not provision") != std::string::npos) {
      ++c.not_run;
      if (c.not_run_reason.empty()) c.not_run_reason = out;
      continue;
    }
    const int runs = std::atoi(out.c_str());
    if (runs == expected + 1 || (slack && runs == expected + 2)) {
      expected = runs;
      slack = false;
    } else {
      c.problems.push_back("a call printed " + out + " after " + std::to_string(expected) +
                           " runs in its sandbox: it ran twice");
    }
  }
  for (const auto& [id, n] : results) {
    if (n != 1) c.problems.push_back("call " + id + " has " + std::to_string(n) + " results");
  }
  return c;
}

TEST(ClusterTest, SessionsCompleteWholeThroughKillsOfAHostAHarnessAReplicaAndAnEtcdRestart) {
  if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
  const int sessions = std::getenv("SINEW_CLUSTER_SESSIONS") ? std::atoi(std::getenv("SINEW_CLUSTER_SESSIONS")) : 100;
  testing::TempDir dir;
  coord::test::EtcdProcess etcd;
  ASSERT_FALSE(etcd.endpoint().empty());
  auto etcd_client = coord::EtcdClient::Connect(etcd.endpoint());
  ASSERT_TRUE(etcd_client.ok());

  std::vector<std::unique_ptr<testing::Subprocess>> shards;
  for (const char* id : {"s1", "s2"}) {
    std::string address, seen;
    shards.push_back(StartStoreShard(dir.Sub(id), etcd.endpoint(), id, 0, &address, &seen));
    ASSERT_FALSE(address.empty()) << seen;
  }
  std::vector<std::unique_ptr<SandboxHost>> hosts;
  for (int i = 1; i <= 3; ++i) {
    hosts.push_back(std::make_unique<SandboxHost>("h" + std::to_string(i), etcd.endpoint(), 0, 2));
    ASSERT_FALSE(hosts.back()->address.empty()) << "sinew-sandboxd did not start (root, runc, image needed)";
  }
  std::vector<ModelDouble> replicas;
  for (int i = 0; i < 2; ++i) {
    replicas.push_back(StartModelDouble());
    ASSERT_FALSE(replicas.back().url.empty()) << "the model double did not start";
  }
  const std::string replica_urls = "\"" + replicas[0].url + "\", \"" + replicas[1].url + "\"";
  const std::string config = R"({"listen": "127.0.0.1:0", "store": {"etcd": ")" + etcd.endpoint() +
                             R"("}, "sandboxd": {"etcd": ")" + etcd.endpoint() + R"("},
    "api_keys": {")" + kKey + R"(": "t"}, "lease_ttl_ms": 3000, "scan_interval_ms": 500,
    "models": {"m": {"kind": "openai", "model": "double", "stream": "off", "backoff_ms": 100, "max_retries": 8,
                     "replicas": [)" + replica_urls + "]}}}";
  std::vector<std::unique_ptr<HarnessProcess>> harnesses;
  for (int i = 0; i < 3; ++i) {
    harnesses.push_back(std::make_unique<HarnessProcess>(dir.Sub("h" + std::to_string(i) + ".json"), config));
    ASSERT_FALSE(harnesses.back()->address.empty());
  }
  for (auto& h : harnesses) {
    for (int i = 0; i < 300 && Call("GET", h->url() + "/readyz").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(Call("GET", h->url() + "/readyz").status, 200);
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  for (int i = 0; i < sessions; ++i) {
    auto r = Api("POST", harnesses[static_cast<size_t>(i) % 3]->url() + "/v1/sessions", kKey, kTask);
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  const std::string survivor = harnesses[1]->url();
  // Once a third of the sessions have a tool result, the faults, one after another.
  auto with_results = [&] {
    int n = 0;
    for (const auto& id : ids) {
      for (const auto& e : AllEvents(survivor, kKey, id)) {
        if (e.contains("tool_result")) {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  for (int i = 0; i < 600 && with_results() < sessions / 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  hosts[0]->Kill();
  harnesses[0]->proc->Signal(SIGKILL);
  harnesses[0]->proc->Wait();
  replicas[0].proc->Signal(SIGKILL);
  replicas[0].proc->Wait();
  etcd.Kill();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(etcd.Start());
  const double faults_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int completed = 0, lost = 0, interrupted = 0, not_run = 0, calls = 0;
  std::map<std::string, int> reasons;  // why calls did not run -> sessions
  for (const auto& id : ids) {
    const std::string status = WaitForStatus(survivor, kKey, id, "completed,failed,cancelled", 900);
    EXPECT_EQ(status, "completed") << id;
    completed += status == "completed" ? 1 : 0;
    Checked c = CheckLog(AllEvents(survivor, kKey, id));
    for (const auto& p : c.problems) ADD_FAILURE() << "session " << id << ": " << p;
    lost += c.lost;
    interrupted += c.interrupted;
    not_run += c.not_run;
    if (!c.not_run_reason.empty()) ++reasons[c.not_run_reason.substr(0, 160)];
    calls += c.calls;
  }
  const double all_done = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The shard map came through the etcd restart, and both shards hold sessions.
  auto listing = (*etcd_client)->GetPrefix(store::kShardPrefix);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  std::map<std::string, std::string> keys;
  for (const auto& kv : listing->kvs) keys[kv.key] = kv.value;
  auto map = store::ShardMap::FromKeys(keys);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->addresses().size(), 2u);
  std::map<std::string, int> per_shard;
  for (const auto& id : ids) ++per_shard[*map->ShardOf(id)];
  EXPECT_GT(per_shard["s1"], 0);
  EXPECT_GT(per_shard["s2"], 0);
  auto after = Api("POST", survivor + "/v1/sessions", kKey, kTask);
  ASSERT_EQ(after.status, 201) << after.body;
  EXPECT_EQ(WaitForStatus(survivor, kKey, std::string(after.json.at("session").at("id").as_string()), "completed", 300),
            "completed");

  const std::string metrics = Call("GET", survivor + "/metrics").body;
  std::cout << "cluster: " << completed << " of " << sessions << " sessions completed; faults at " << faults_at
            << " s, all done at " << all_done << " s; " << calls << " tool calls, " << lost << " sandbox_lost, "
            << interrupted << " interrupted, " << not_run << " not run (lost sandbox or no provision); sessions per "
            << "shard s1 " << per_shard["s1"] << ", s2 " << per_shard["s2"] << "\n";
  for (const auto& [why, n] : reasons) std::cout << "  not run in " << n << " sessions: " << why << "\n";
  for (const char* m : {"sinew_harness_model_replica_up", "sinew_harness_model_replica_failures_total",
                        "sinew_harness_model_replica_moved_in_total"}) {
    for (size_t at = metrics.find(std::string(m) + "{"); at != std::string::npos;
         at = metrics.find(std::string(m) + "{", at + 1)) {
      std::cout << "  " << metrics.substr(at, metrics.find('\n', at) - at) << "\n";
    }
  }
}

}  // namespace
}  // namespace sinew::harness::test
