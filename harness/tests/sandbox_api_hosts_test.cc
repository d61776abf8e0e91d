// The sandbox API (docs/sandbox-api.md) over sandbox hosts placed through etcd
// (docs/scale-out.md): an etcd process, two sinew-sandboxd hosts that register there,
// sinew-store and two sinew-harness processes with config sandboxd.etcd. Needs root,
// runc and the image.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "etcd_process.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "hosts-key";

TEST(SandboxApiHostsTest, SandboxesArePlacedOverTheHostsAndReachedOnTheirHostFromAnyHarness) {
  if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
  testing::TempDir dir;
  coord::test::EtcdProcess etcd;
  ASSERT_FALSE(etcd.endpoint().empty()) << "etcd did not start";
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  std::vector<std::unique_ptr<SandboxHost>> hosts;
  // Room for two default sandboxes (1000 millicores each) per host, whatever this machine's
  // core count: the four below fill both hosts exactly, so a placement that counted a
  // sandbox twice (the host's record and the harness's own pending count) is refused.
  for (const char* id : {"h1", "h2"}) {
    hosts.push_back(std::make_unique<SandboxHost>(id, etcd.endpoint(), 8ull << 30, 5,
                                                  std::vector<std::string>{"--capacity-cpu-millicores", "2000"}));
    ASSERT_FALSE(hosts.back()->address.empty())
        << "sinew-sandboxd did not start (root, runc, image needed)";
  }
  const std::string script =
      WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "done"}]})");
  const std::string config =
      R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address +
      R"("}, "sandboxd": {"etcd": ")" + etcd.endpoint() + R"("}, "api_keys": {")" + kKey +
      R"(": "t"}, "models": {"scripted": {"kind": "scripted", "script": ")" + script + R"("}}})";
  HarnessProcess first(dir.Sub("first.json"), config), second(dir.Sub("second.json"), config);
  ASSERT_FALSE(first.address.empty());
  ASSERT_FALSE(second.address.empty());
  for (const auto* h : {&first, &second}) {
    // Ready once it has read the host set from etcd.
    for (int i = 0; i < 300 && Call("GET", h->url() + "/readyz").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(Call("GET", h->url() + "/readyz").status, 200);
  }
  // Four sandboxes through the first harness spread over both hosts (least loaded first).
  std::vector<std::string> ids;
  std::set<std::string> used;
  for (int i = 0; i < 4; ++i) {
    auto r =
        Api("POST", first.url() + "/v1/sandboxes", kKey, R"({"memory_limit_bytes": 268435456})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("sandbox").at("id").as_string());
    used.insert(std::string(r.json.at("sandbox").at("host_id").as_string()));
  }
  EXPECT_EQ(used, (std::set<std::string>{"h1", "h2"}));
  // Each is reached on its host through the second harness.
  for (const auto& id : ids) {
    auto ran = Api(
        "POST", second.url() + "/v1/sandboxes/" + id + "/execute", kKey,
        R"({"name": "bash", "input": {"command": "echo kept > /workspace/f; echo ok"}})");
    ASSERT_EQ(ran.status, 200) << ran.body;
    EXPECT_EQ(ran.json.at("result").at("output").as_string(), "ok\n");
  }
  // A sandbox from a snapshot goes to the host that holds the snapshot.
  auto source = Api("GET", second.url() + "/v1/sandboxes/" + ids[1], kKey);
  const std::string source_host(source.json.at("sandbox").at("host_id").as_string());
  auto snap = Api("POST", second.url() + "/v1/sandboxes/" + ids[1] + "/snapshot", kKey);
  ASSERT_EQ(snap.status, 201) << snap.body;
  auto restored = Api("POST", first.url() + "/v1/sandboxes", kKey,
                      R"({"from_snapshot": ")" +
                          std::string(snap.json.at("snapshot").at("id").as_string()) + R"("})");
  ASSERT_EQ(restored.status, 201) << restored.body;
  EXPECT_EQ(restored.json.at("sandbox").at("host_id").as_string(), source_host);
  const std::string restored_id(restored.json.at("sandbox").at("id").as_string());
  auto read = Api("POST", second.url() + "/v1/sandboxes/" + restored_id + "/execute", kKey,
                  R"({"name": "read_file", "input": {"path": "f"}})");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_NE(std::string(read.json.at("result").at("output").as_string()).find("kept"),
            std::string::npos)
      << read.body;
  ids.push_back(restored_id);
  // The tenant's snapshots are listed from both hosts, their bytes summed, and one on
  // either host is deleted through either harness.
  std::string elsewhere;  // a sandbox on the other host
  for (const auto& id : ids) {
    auto got = Api("GET", first.url() + "/v1/sandboxes/" + id, kKey);
    if (got.json.at("sandbox").at("host_id").as_string() != source_host) elsewhere = id;
  }
  ASSERT_FALSE(elsewhere.empty());
  auto snap2 = Api("POST", first.url() + "/v1/sandboxes/" + elsewhere + "/snapshot", kKey);
  ASSERT_EQ(snap2.status, 201) << snap2.body;
  auto listed = Api("GET", second.url() + "/v1/sandboxes/snapshots", kKey);
  ASSERT_EQ(listed.status, 200) << listed.body;
  std::set<std::string> snapshot_hosts;
  int64_t data_bytes = 0;
  for (const auto& s : listed.json.at("snapshots").as_array()) {
    snapshot_hosts.insert(std::string(s.at("host_id").as_string()));
    data_bytes += s.at("data_bytes").to_number<int64_t>();
  }
  EXPECT_EQ(snapshot_hosts, (std::set<std::string>{"h1", "h2"})) << listed.body;
  EXPECT_EQ(listed.json.at("snapshots").as_array().size(), 2u) << listed.body;
  EXPECT_EQ(listed.json.at("owner_bytes").to_number<int64_t>(), data_bytes) << listed.body;
  for (const auto* taken : {&snap, &snap2}) {
    const std::string snap_id(taken->json.at("snapshot").at("id").as_string());
    EXPECT_EQ(Call("DELETE", first.url() + "/v1/sandboxes/snapshots/" + snap_id, "",
                   {"Authorization: Bearer " + std::string(kKey)})
                  .status,
              200)
        << snap_id;
  }
  EXPECT_TRUE(Api("GET", first.url() + "/v1/sandboxes/snapshots", kKey).json.at("snapshots").as_array().empty());
  for (const auto& id : ids) {
    EXPECT_EQ(Call("DELETE", second.url() + "/v1/sandboxes/" + id, "",
                   {"Authorization: Bearer " + std::string(kKey)})
                  .status,
              200);
  }
  EXPECT_TRUE(
      Api("GET", first.url() + "/v1/sandboxes", kKey).json.at("sandboxes").as_array().empty());
}

}  // namespace
}  // namespace sinew::harness::test
