// bench_cluster: sessions completed per minute with 1..3 harnesses and 1..3 sandbox hosts
// (issue 17's benchmark; docs/scale-out.md), all on loopback, every configuration in one
// run and compared with the first (one harness, one host).
//
// Each configuration is a fresh cluster: etcd, one sinew-store, the sandbox hosts
// (sinew-sandboxd registered in etcd, runc sandboxes), the harnesses (placing through
// etcd) and one model double (harness/tests/model_double.py: an OpenAI-compatible server
// process that asks for two bash calls, then answers; --model-ms per answer). A closed
// loop keeps --concurrency sessions in flight, spread over the harnesses in turn, until
// --sessions have ended; sessions per minute is sessions / (first POST to last end).
// The same load goes to every configuration, so the figures show what spreading it over
// more processes costs or gains. Everything shares this machine's cores: more hosts and
// harnesses add processes, not CPUs (the load average is printed per configuration).
//
// Usage: bench_cluster [--sessions 90] [--concurrency 30] [--model-ms 100]
//                      [--harnesses 1,2,3] [--hosts 1,2,3]
// Needs root, runc, the sandbox image and etcd (as the runc tests do).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "etcd_process.h"
#include "test_util.h"

namespace sinew::harness::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace json = boost::json;
constexpr const char* kKey = "bench-key";
// 50 millicores: a 2-CPU host takes 40 (placement counts the CPU guarantee).
constexpr const char* kTask =
    R"({"prompt": "count", "sandbox": {"cpu_millis": 50, "memory_limit_bytes": 134217728}})";

std::string ArgStr(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == name) return argv[i + 1];
  }
  return fallback;
}

std::vector<int> IntList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

int64_t Int64(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_string()) return std::atoll(std::string(v->as_string()).c_str());
  return v->is_int64() ? v->as_int64() : 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  int harnesses = 0, hosts = 0, ended = 0, completed = 0;
  double seconds = 0, per_minute = 0, load_before = 0, load_after = 0;
  double provision_ms = 0, placement_us = 0;  // medians over the sessions' sandboxes
  std::set<std::string> hosts_used;
  std::string error;
};

// Ids of sessions with `status`, as the harness lists them.
std::set<std::string> Listed(const std::string& url, const std::string& status) {
  std::set<std::string> ids;
  auto r = test::Api("GET", url + "/v1/sessions?status=" + status + "&limit=1000", kKey);
  if (r.status != 200 || !r.json.is_object()) return ids;
  for (const auto& s : r.json.at("sessions").as_array()) ids.insert(std::string(s.at("id").as_string()));
  return ids;
}

Row RunOne(int n_harnesses, int n_hosts, int sessions, int concurrency, int model_ms) {
  Row row;
  row.harnesses = n_harnesses;
  row.hosts = n_hosts;
  testing::TempDir dir("sinew-bench-cluster");
  coord::test::EtcdProcess etcd;
  if (etcd.endpoint().empty()) {
    row.error = "etcd did not start (etcd-server)";
    return row;
  }
  test::StoreProcess store(dir.Sub("store"));
  std::vector<std::unique_ptr<test::SandboxHost>> hosts;
  for (int i = 1; i <= n_hosts; ++i) {
    hosts.push_back(std::make_unique<test::SandboxHost>("h" + std::to_string(i), etcd.endpoint(), 0, 5));
    if (hosts.back()->address.empty()) {
      row.error = "sinew-sandboxd did not start (root, runc and the sandbox image are needed)";
      return row;
    }
  }
  test::ModelDouble model = test::StartModelDouble(model_ms);
  if (model.url.empty() || store.address.empty()) {
    row.error = "the model double or sinew-store did not start";
    return row;
  }
  const std::string config = R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address +
                             R"("}, "sandboxd": {"etcd": ")" + etcd.endpoint() + R"("}, "api_keys": {")" + kKey +
                             R"(": "t"}, "models": {"m": {"kind": "openai", "model": "double", "stream": "off",
                             "base_url": ")" + model.url + R"("}}})";
  std::vector<std::unique_ptr<test::HarnessProcess>> harnesses;
  for (int i = 0; i < n_harnesses; ++i) {
    harnesses.push_back(
        std::make_unique<test::HarnessProcess>(dir.Sub("h" + std::to_string(i) + ".json"), config));
    const std::string url = harnesses.back()->url();
    for (int k = 0; k < 300 && test::Call("GET", url + "/readyz").status != 200; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (harnesses.back()->address.empty() || test::Call("GET", url + "/readyz").status != 200) {
      row.error = "a harness did not become ready";
      return row;
    }
  }
  // Every harness must see every host before the clock starts.
  std::this_thread::sleep_for(std::chrono::seconds(1));

  row.load_before = LoadAverage();
  const auto start = Clock::now();
  std::vector<std::string> ids;
  std::set<std::string> mine, ended, completed;
  const std::string lister = harnesses[0]->url();
  while (static_cast<int>(ended.size()) < sessions) {
    while (static_cast<int>(ids.size()) < sessions &&
           static_cast<int>(ids.size() - ended.size()) < concurrency) {
      auto r = test::Api("POST", harnesses[ids.size() % harnesses.size()]->url() + "/v1/sessions", kKey, kTask);
      if (r.status != 201) {
        row.error = "POST /v1/sessions answered " + std::to_string(r.status) + ": " + r.body;
        return row;
      }
      ids.emplace_back(r.json.at("session").at("id").as_string());
      mine.insert(ids.back());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (const char* status : {"completed", "failed", "cancelled"}) {
      for (const auto& id : Listed(lister, status)) {
        if (!mine.count(id)) continue;
        ended.insert(id);
        if (std::string(status) == "completed") completed.insert(id);
      }
    }
    if (Clock::now() - start > std::chrono::minutes(20)) {
      row.error = "not every session ended within 20 minutes";
      break;
    }
  }
  row.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  row.load_after = LoadAverage();
  row.ended = static_cast<int>(ended.size());
  row.completed = static_cast<int>(completed.size());
  row.per_minute = row.ended * 60.0 / row.seconds;
  std::vector<double> provision, placement;
  for (const auto& id : ids) {
    for (const auto& e : test::AllEvents(lister, kKey, id)) {
      if (!e.contains("sandbox_provisioned")) continue;
      const auto& p = e.at("sandbox_provisioned").as_object();
      provision.push_back(static_cast<double>(Int64(p, "provision_ms")));
      placement.push_back(static_cast<double>(Int64(p, "placement_us")));
      row.hosts_used.insert(test::Str(p, "host_id"));
    }
  }
  row.provision_ms = Median(provision);
  row.placement_us = Median(placement);
  return row;
}

int Run(int argc, char** argv) {
  const int sessions = std::atoi(ArgStr(argc, argv, "--sessions", "90").c_str());
  const int concurrency = std::atoi(ArgStr(argc, argv, "--concurrency", "30").c_str());
  const int model_ms = std::atoi(ArgStr(argc, argv, "--model-ms", "100").c_str());
  const auto harness_counts = IntList(ArgStr(argc, argv, "--harnesses", "1,2,3"));
  const auto host_counts = IntList(ArgStr(argc, argv, "--hosts", "1,2,3"));
  std::printf("bench_cluster: %d sessions per configuration, %d in flight, model %d ms per answer, "
              "2 bash calls per session; %u CPUs shared by every process\n",
              sessions, concurrency, model_ms, std::thread::hardware_concurrency());
  std::vector<Row> rows;
  for (int h : harness_counts) {
    for (int s : host_counts) {
      Row row = RunOne(h, s, sessions, concurrency, model_ms);
      if (!row.error.empty()) {
        std::printf("%d harness(es), %d host(s): %s\n", h, s, row.error.c_str());
        if (row.ended == 0) return 1;
      }
      std::printf("  %d harness(es) x %d host(s): %.1f sessions/min (%d of %d completed in %.1f s), hosts used %zu, "
                  "provision p50 %.0f ms, placement p50 %.0f us, load %.1f -> %.1f\n",
                  h, s, row.per_minute, row.completed, sessions, row.seconds, row.hosts_used.size(),
                  row.provision_ms, row.placement_us, row.load_before, row.load_after);
      std::fflush(stdout);
      rows.push_back(row);
    }
  }
  const double base = rows.front().per_minute;
  std::printf("\n| harnesses | hosts | sessions/min | ratio to %dx%d | completed | provision p50 ms | "
              "placement p50 us | load 1-min |\n|---|---|---|---|---|---|---|---|\n",
              rows.front().harnesses, rows.front().hosts);
  for (const auto& r : rows) {
    std::printf("| %d | %d | %.1f | %.2fx | %d/%d | %.0f | %.0f | %.1f..%.1f |\n", r.harnesses, r.hosts,
                r.per_minute, base > 0 ? r.per_minute / base : 0, r.completed, sessions, r.provision_ms,
                r.placement_us, r.load_before, r.load_after);
  }
  for (const auto& r : rows) {
    if (r.completed != sessions) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sinew::harness::bench

int main(int argc, char** argv) { return sinew::harness::bench::Run(argc, argv); }
