// Store shards (docs/scale-out.md, "Store shards"), all real: an etcd process, two
// sinew-store processes that join the shard map with --etcd/--shard-id, and sinew-harness
// with config store.etcd. Sessions made before the second shard joins stay on the first;
// later ones spread over both, each on the shard the map names; the REST API lists them
// all across shards, page by page, newest first; a store directory keeps its shard id.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/session_store/shard_map.h"
#include "sinew/testing/certs.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "shards-key";

std::unique_ptr<testing::Subprocess> StartShard(const std::string& db, const std::string& etcd,
                                                const std::string& id, std::string* address) {
  std::string seen;
  auto proc = StartStoreShard(db, etcd, id, 1500, address, &seen);
  if (address->empty()) ADD_FAILURE() << "store shard " << id << " did not start:\n" << seen;
  return proc;
}

Result<store::ShardMap> ReadMap(coord::EtcdClient* etcd) {
  SINEW_ASSIGN_OR_RETURN(coord::Listing l, etcd->GetPrefix(store::kShardPrefix));
  std::map<std::string, std::string> keys;
  for (const auto& kv : l.kvs) keys[kv.key] = kv.value;
  return store::ShardMap::FromKeys(keys);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> CreateSessions(const std::string& base, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    auto r = Api("POST", base + "/v1/sessions", kKey, R"({"prompt": "hello"})");
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status == 201) ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  for (const auto& id : ids) EXPECT_EQ(WaitForStatus(base, kKey, id, "completed,failed"), "completed");
  return ids;
}

// A plain etcd and a client of it.
class StoreShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
    etcd_ = std::make_unique<coord::test::EtcdProcess>();
    ASSERT_FALSE(etcd_->endpoint().empty());
    auto c = coord::EtcdClient::Connect(etcd_->endpoint());
    ASSERT_TRUE(c.ok());
    etcd_client_ = std::move(c).value();
  }
  std::unique_ptr<coord::test::EtcdProcess> etcd_;
  std::unique_ptr<coord::EtcdClient> etcd_client_;
};

TEST_F(StoreShardsTest, SessionsSpreadOverShardsAndNoneMovesWhenOneJoins) {
  coord::test::EtcdProcess& etcd = *etcd_;
  testing::TempDir dir;
  std::string a_address, b_address;
  auto a = StartShard(dir.Sub("a"), etcd.endpoint(), "a", &a_address);
  ASSERT_FALSE(a_address.empty());
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "hi"}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0",
    "store": {"etcd": ")" + etcd.endpoint() + R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"m": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("}}})");
  ASSERT_FALSE(harness.address.empty());
  const std::vector<std::string> before = CreateSessions(harness.url(), 6);
  ASSERT_EQ(before.size(), 6u);

  // The second shard joins; its generation starts 1.5 s later (--shard-grace-ms).
  auto b = StartShard(dir.Sub("b"), etcd.endpoint(), "b", &b_address);
  ASSERT_FALSE(b_address.empty());
  auto map = ReadMap(etcd_client_.get());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->generations().size(), 2u);
  EXPECT_EQ(map->generations()[0].from_unix_ms, 0);
  EXPECT_EQ(map->generations()[1].shards, (std::vector<std::string>{"a", "b"}));
  while (NowMs() <= map->generations()[1].from_unix_ms) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::vector<std::string> after = CreateSessions(harness.url(), 20);
  ASSERT_EQ(after.size(), 20u);

  // Each session is on exactly the shard the map names; the early ones all on "a".
  auto on_a = store::ConnectSessionStore(a_address);
  auto on_b = store::ConnectSessionStore(b_address);
  ASSERT_TRUE(on_a.ok() && on_b.ok());
  std::map<std::string, int> per_shard;
  for (const auto* ids : {&before, &after}) {
    for (const auto& id : *ids) {
      const std::string shard = *map->ShardOf(id);
      const bool in_a = (*on_a)->GetSession(id).ok();
      const bool in_b = (*on_b)->GetSession(id).ok();
      EXPECT_NE(in_a, in_b) << id;
      EXPECT_EQ(in_a ? "a" : "b", shard) << id;
      if (ids == &before) {
        EXPECT_EQ(shard, "a") << "a session made before b joined is on " << shard;
      }
      if (ids == &after) ++per_shard[shard];
    }
  }
  EXPECT_GT(per_shard["a"], 0);
  EXPECT_GT(per_shard["b"], 0);

  // Their logs read through the harness on either shard.
  for (const auto& id : {before.front(), after.front(), after.back()}) {
    auto events = AllEvents(harness.url(), kKey, id);
    ASSERT_FALSE(events.empty()) << id;
    EXPECT_TRUE(events.back().contains("status_change")) << json::serialize(events.back());
  }
  // The list crosses shards: every session once, newest first, 7 at a time.
  std::vector<std::string> listed;
  std::string token;
  int64_t last_created = INT64_MAX;
  for (int page = 0; page < 10; ++page) {
    auto r = Api("GET", harness.url() + "/v1/sessions?limit=7" + (token.empty() ? "" : "&page_token=" + token), kKey);
    ASSERT_EQ(r.status, 200) << r.body;
    for (const auto& s : r.json.at("sessions").as_array()) {
      listed.emplace_back(s.at("id").as_string());
      const int64_t created = s.at("created_unix_ms").to_number<int64_t>();
      EXPECT_LE(created, last_created) << "not newest first";
      last_created = created;
    }
    token = std::string(r.json.at("next_page_token").as_string());
    if (token.empty()) break;
  }
  EXPECT_TRUE(token.empty());
  std::set<std::string> unique(listed.begin(), listed.end());
  EXPECT_EQ(listed.size(), 26u);
  EXPECT_EQ(unique.size(), 26u);
  // Exports of sessions on both shards: the tenant audit log lists each once, merged over
  // the shards oldest first, page by page.
  std::vector<std::string> exported;
  for (const auto& id : {before.front(), after.front(), after.back(), before.back()}) {
    auto r = Call("GET", harness.url() + "/v1/sessions/" + id + "/export", "", {"Authorization: Bearer " + std::string(kKey)});
    ASSERT_EQ(r.status, 200) << r.body;
    exported.push_back(id);
  }
  std::vector<std::string> audited, record_ids;
  std::string audit_token;
  for (int page = 0; page < 10; ++page) {
    auto r = Api("GET", harness.url() + "/v1/audit?limit=3" + (audit_token.empty() ? "" : "&page_token=" + audit_token), kKey);
    ASSERT_EQ(r.status, 200) << r.body;
    for (const auto& rec : r.json.at("records").as_array()) {
      audited.emplace_back(rec.at("session_id").as_string());
      record_ids.emplace_back(rec.at("id").as_string());
    }
    audit_token = std::string(r.json.at("next_page_token").as_string());
    if (audit_token.empty()) break;
  }
  // (Two records written in the same millisecond on two shards may list in either order.)
  EXPECT_TRUE(std::is_sorted(record_ids.begin(), record_ids.end()));
  std::sort(audited.begin(), audited.end());
  std::sort(exported.begin(), exported.end());
  EXPECT_EQ(audited, exported);
  // A session no shard has is a plain 404.
  auto missing = Api("GET", harness.url() + "/v1/sessions/0123456789abcdef0123456789abcdef", kKey);
  EXPECT_EQ(missing.status, 404) << missing.body;
  std::printf("store shards: 6 sessions before b joined, all on a; 20 after: a %d, b %d\n", per_shard["a"],
              per_shard["b"]);

  // A store directory keeps its shard id.
  a.reset();
  testing::Subprocess renamed({testing::BinaryPath("sinew-store"), "--db", dir.Sub("a"), "--listen", "127.0.0.1:0",
                               "--etcd", etcd.endpoint(), "--shard-id", "c"});
  EXPECT_TRUE(renamed.WaitForLine("holds store shard 'a', not 'c'", std::chrono::seconds(30)).has_value());
  const int status = renamed.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
}

// TLS to etcd (docs/security.md): etcd serves only https with client certificates
// required; the store shard joins the map and the harness reads it over TLS, and a store
// or harness without a certificate is refused.
TEST(StoreShardsTlsTest, TheShardMapIsReachedOverTlsToEtcd) {
  if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
  testing::TempDir dir;
  testing::MakeCerts(dir.Sub("certs"), {"etcd", "store", "harness"});
  auto identity = [&](const std::string& name) { return testing::CertFiles(dir.Sub("certs"), name); };
  coord::test::EtcdProcess etcd(coord::test::EtcdTls{identity("etcd"), identity("harness")});
  ASSERT_FALSE(etcd.endpoint().empty()) << "etcd did not start with TLS";
  const GrpcTlsOptions store_tls = identity("store");
  std::string address, seen;
  auto shard = StartStoreShard(dir.Sub("a"), etcd.endpoint(), "a", 0, &address, &seen,
                               {"--etcd-tls-cert", store_tls.cert_file, "--etcd-tls-key", store_tls.key_file,
                                "--etcd-tls-ca", store_tls.ca_file});
  ASSERT_FALSE(address.empty()) << seen;
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "hi"}]})");
  const GrpcTlsOptions h = identity("harness");
  const std::string config = R"({"listen": "127.0.0.1:0", "store": {"etcd": ")" + etcd.endpoint() +
                             R"("}, "api_keys": {")" + kKey + R"(": "t"}, "models": {"m": {"kind": "scripted",
    "script": ")" + dir.Sub("script.json") + R"("}}, "etcd_tls": {"cert_file": ")" + h.cert_file +
                             R"(", "key_file": ")" + h.key_file + R"(", "ca_file": ")" + h.ca_file + R"("}})";
  HarnessProcess harness(dir.Sub("harness.json"), config);
  ASSERT_FALSE(harness.address.empty());
  EXPECT_EQ(CreateSessions(harness.url(), 3).size(), 3u);

  // Without a certificate neither joins: the store exits, the harness does not start.
  std::string plain_address, plain_seen;
  auto plain = StartStoreShard(dir.Sub("b"), etcd.endpoint(), "b", 0, &plain_address, &plain_seen);
  EXPECT_TRUE(plain_address.empty()) << "a store without a client certificate joined the map";
  EXPECT_NE(plain->Wait(), 0);
  std::string no_tls = config;
  no_tls.erase(no_tls.find(R"(, "etcd_tls")"), no_tls.rfind('}') - no_tls.find(R"(, "etcd_tls")"));
  HarnessProcess refused(dir.Sub("refused.json"), no_tls);
  EXPECT_TRUE(refused.address.empty()) << "a harness without a client certificate read the map";
}

// One store shard down (docs/scale-out.md, "One shard down"): harnesses stay ready, new
// sessions go to the shard that answers, a session whose harness died is taken over from
// that shard by another harness, and a session on the dead shard answers 503.
TEST_F(StoreShardsTest, OneShardDownLeavesTheOthersServing) {
  coord::test::EtcdProcess& etcd = *etcd_;
  testing::TempDir dir;
  std::string a_address, b_address;
  std::string seen;
  auto a = StartStoreShard(dir.Sub("a"), etcd.endpoint(), "a", 0, &a_address, &seen);
  auto b = StartStoreShard(dir.Sub("b"), etcd.endpoint(), "b", 0, &b_address, &seen);
  ASSERT_FALSE(a_address.empty()) << seen;
  ASSERT_FALSE(b_address.empty()) << seen;
  auto map = ReadMap(etcd_client_.get());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "hi"}]})");
  WriteFile(dir.Sub("slow.json"), R"({"responses": [{"text": "slow", "delay_ms": 60000}]})");
  const std::string config = R"({"listen": "127.0.0.1:0", "store": {"etcd": ")" + etcd.endpoint() +
                             R"("}, "api_keys": {")" + kKey + R"(": "t"}, "lease_ttl_ms": 2000, "scan_interval_ms": 300,
    "models": {"m": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("},
               "slow": {"kind": "scripted", "script": ")" + dir.Sub("slow.json") + R"("}}})";
  auto first = std::make_unique<HarnessProcess>(dir.Sub("first.json"), config);
  ASSERT_FALSE(first->address.empty());
  // Sessions of the first harness that hang in a model call: one on each shard.
  std::map<std::string, std::string> stuck;  // shard -> session
  for (int i = 0; i < 40 && stuck.size() < 2; ++i) {
    auto r = Api("POST", first->url() + "/v1/sessions", kKey, R"({"prompt": "wait", "model": "slow"})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id(r.json.at("session").at("id").as_string());
    stuck.emplace(*map->ShardOf(id), id);
  }
  ASSERT_EQ(stuck.size(), 2u);
  for (const auto& [shard, id] : stuck) EXPECT_EQ(WaitForStatus(first->url(), kKey, id, "running"), "running");
  // The first harness dies, then shard b.
  first->proc->Signal(SIGKILL);
  first->proc->Wait();
  b->Signal(SIGKILL);
  b->Wait();

  HarnessProcess second(dir.Sub("second.json"), config);
  ASSERT_FALSE(second.address.empty());
  for (int i = 0; i < 100 && Call("GET", second.url() + "/readyz").status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Call("GET", second.url() + "/readyz").status, 200) << "one shard down took the harness out";
  // New sessions: all on a, all completed.
  for (int i = 0; i < 8; ++i) {
    auto r = Api("POST", second.url() + "/v1/sessions", kKey, R"({"prompt": "hello"})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id(r.json.at("session").at("id").as_string());
    EXPECT_EQ(*map->ShardOf(id), "a") << id;
    EXPECT_EQ(WaitForStatus(second.url(), kKey, id, "completed,failed"), "completed");
  }
  // The session on a is taken over (its lease ran out): the second harness's take-over
  // writes a resume annotation and the slow call runs again.
  const std::string on_a = stuck["a"];
  bool resumed = false;
  for (int i = 0; i < 100 && !resumed; ++i) {
    for (const auto& e : AllEvents(second.url(), kKey, on_a)) {
      if (e.contains("annotation") && Str(e.at("annotation").as_object(), "text").find("resum") != std::string::npos)
        resumed = true;
    }
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(resumed) << "the session on the live shard was not taken over";
  // The session on b answers 503 while b is down.
  auto on_b = Api("GET", second.url() + "/v1/sessions/" + stuck["b"], kKey);
  EXPECT_EQ(on_b.status, 503) << on_b.body;
}


// A store shard SIGKILLed and restarted on the same directory and port is served through
// the harness as soon as it listens again (docs/scale-out.md, "One shard down"): the
// harness's channel to it must not sit out a reconnect backoff that grew while the shard
// was down. Each cycle keeps the shard down for SINEW_SHARD_DOWN_MS (default 5000, longer
// than the first backoff steps) while the harness keeps asking for its session, restarts
// it, and reports how long after the store's "listening" line the harness answered 200.
// SINEW_SHARD_RESTART_CYCLES sets the cycles (default 1; the `long` label runs several).
TEST_F(StoreShardsTest, ARestartedShardIsServedThroughTheHarnessOnceItListens) {
  const char* cycles_env = std::getenv("SINEW_SHARD_RESTART_CYCLES");
  const char* down_env = std::getenv("SINEW_SHARD_DOWN_MS");
  const int cycles = cycles_env != nullptr ? std::atoi(cycles_env) : 1;
  const int down_ms = down_env != nullptr ? std::atoi(down_env) : 5000;
  coord::test::EtcdProcess& etcd = *etcd_;
  testing::TempDir dir;
  std::string a_address, b_address, seen;
  auto a = StartStoreShard(dir.Sub("a"), etcd.endpoint(), "a", 0, &a_address, &seen);
  auto b = StartStoreShard(dir.Sub("b"), etcd.endpoint(), "b", 0, &b_address, &seen);
  ASSERT_FALSE(a_address.empty()) << seen;
  ASSERT_FALSE(b_address.empty()) << seen;
  auto map = ReadMap(etcd_client_.get());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "hi"}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0",
    "store": {"etcd": ")" + etcd.endpoint() + R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"m": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("}}})");
  ASSERT_FALSE(harness.address.empty());
  std::string on_b;  // a completed session on shard b
  for (int i = 0; i < 64 && on_b.empty(); ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "hello"})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id(r.json.at("session").at("id").as_string());
    if (*map->ShardOf(id) == "b") on_b = id;
  }
  ASSERT_FALSE(on_b.empty()) << "no session landed on shard b";
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, on_b, "completed,failed"), "completed");
  const std::string session_url = harness.url() + "/v1/sessions/" + on_b;
  using Clock = std::chrono::steady_clock;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    ASSERT_EQ(Api("GET", session_url, kKey).status, 200) << "cycle " << cycle;
    b->Signal(SIGKILL);
    b->Wait();
    // Down: the harness answers 503 for the shard's session (and keeps trying it, which is
    // what grows a reconnect backoff).
    const auto up_at = Clock::now() + std::chrono::milliseconds(down_ms);
    while (Clock::now() < up_at) {
      EXPECT_EQ(Api("GET", session_url, kKey).status, 503) << "cycle " << cycle;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    b = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", dir.Sub("b"), "--listen", b_address, "--etcd", etcd.endpoint(),
        "--shard-id", "b"});
    ASSERT_TRUE(b->WaitForLine("listening on", std::chrono::seconds(30)).has_value()) << "cycle " << cycle;
    const auto listening = Clock::now();
    // Asked every 10 ms until it answers (the 60 s are a hang guard; the time is reported
    // below): the harness refuses at most the one request that may have been under way on
    // a connection attempt begun before the shard listened.
    long status = 0;
    int refused = 0;
    while ((status = Api("GET", session_url, kKey).status) != 200 && Clock::now() - listening < std::chrono::seconds(60)) {
      ++refused;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - listening).count();
    ASSERT_EQ(status, 200) << "cycle " << cycle << ": the harness did not serve the restarted shard";
    EXPECT_LE(refused, 1) << "cycle " << cycle << ": " << refused << " requests refused after the shard listened ("
                          << ms << " ms)";
    // Its event stream ends (the session is complete) and its events read whole.
    EXPECT_FALSE(AllEvents(harness.url(), kKey, on_b).empty());
    std::printf("shard restart cycle %d: down %d ms; the harness answered 200 %.0f ms after the shard listened "
                "(%d requests refused before)\n",
                cycle, down_ms, ms, refused);
    RecordProperty("recovery_ms_cycle_" + std::to_string(cycle), static_cast<int>(ms));
  }
}

}  // namespace
}  // namespace sinew::harness::test
