// Sandboxes over several hosts coordinated through etcd (docs/scale-out.md), all real:
// an etcd process, sinew-sandboxd hosts (own state dirs, cgroup parents and ports) that
// register there, sinew-store, and sinew-harness with config sandboxd.etcd, driving the
// scripted model (a test double of a language model). Needs root, runc and the image.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/testing/certs.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "scale-key";
constexpr const char* kHostsPrefix = "/sinew/sandbox-hosts/";

int64_t Int(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_string()) return std::stoll(std::string(v->as_string()));
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  return 0;
}
std::string Str(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

class ScaleOutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
    etcd_ = std::make_unique<coord::test::EtcdProcess>();
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start";
    auto c = coord::EtcdClient::Connect(etcd_->endpoint());
    ASSERT_TRUE(c.ok());
    etcd_client_ = std::move(c).value();
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
  }
  void TearDown() override {
    harness_.reset();
    hosts_.clear();
  }
  void StartHosts(int n, uint64_t memory_capacity, int ttl_s) {
    for (int i = 1; i <= n; ++i) {
      hosts_.push_back(std::make_unique<SandboxHost>("h" + std::to_string(i), etcd_->endpoint(),
                                                     memory_capacity, ttl_s));
      ASSERT_FALSE(hosts_.back()->address.empty())
          << "sinew-sandboxd did not start (root, runc, image needed)";
    }
  }
  void StartHarness(const std::string& script_json) {
    const std::string script = WriteFile(dir_.Sub("script.json"), script_json);
    harness_ = std::make_unique<HarnessProcess>(
        dir_.Sub("h.json"),
        R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
          "sandboxd": {"etcd": ")" +
            etcd_->endpoint() + R"("}, "api_keys": {")" + std::string(kKey) +
            R"(": "t"}, "models": {"scripted": {"kind": "scripted", "script": ")" + script +
            R"("}}})");
    ASSERT_FALSE(harness_->address.empty());
    // Ready once it has read the host set from etcd.
    for (int i = 0; i < 300 && Call("GET", harness_->url() + "/readyz").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(Call("GET", harness_->url() + "/readyz").status, 200);
  }
  std::string NewSession() {
    auto r = Api("POST", harness_->url() + "/v1/sessions", kKey, R"({"prompt": "work"})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json.at("session").at("id").as_string()) : "";
  }
  std::vector<json::object> Of(const std::string& id, const char* type) {
    std::vector<json::object> out;
    for (const auto& e : AllEvents(harness_->url(), kKey, id)) {
      if (e.contains(type)) out.push_back(e.at(type).as_object());
    }
    return out;
  }
  size_t RegisteredHosts() {
    auto l = etcd_client_->GetPrefix(kHostsPrefix);
    return l.ok() ? l->kvs.size() : 0;
  }
  static void Report(const std::vector<json::object>& provisioned) {
    if (provisioned.empty()) return;
    std::vector<int64_t> place, prov;
    for (const auto& p : provisioned) {
      place.push_back(Int(p, "placement_us"));
      prov.push_back(Int(p, "provision_ms"));
    }
    std::sort(place.begin(), place.end());
    std::sort(prov.begin(), prov.end());
    std::cout << "placement decision: median " << place[place.size() / 2] << " us, max "
              << place.back() << " us; provision on the host: median " << prov[prov.size() / 2]
              << " ms, max " << prov.back() << " ms (" << provisioned.size() << " sandboxes)\n";
  }

  sinew::testing::TempDir dir_;
  std::unique_ptr<coord::test::EtcdProcess> etcd_;
  std::unique_ptr<coord::EtcdClient> etcd_client_;
  std::unique_ptr<StoreProcess> store_;
  std::vector<std::unique_ptr<SandboxHost>> hosts_;
  std::unique_ptr<HarnessProcess> harness_;
};

TEST_F(ScaleOutTest, PlacementSpreadsSandboxesAndRespectsCapacity) {
  // Two hosts with room for two 1 GiB guarantees each; five sessions at once.
  StartHosts(2, 2ull << 30, 5);
  ASSERT_EQ(RegisteredHosts(), 2u);
  StartHarness(R"({"responses": [
    {"text": "working", "tool_calls": [{"name": "bash", "input": {"command": "sleep 8; echo held"}}]},
    {"text": "done"}]})");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(NewSession());
  std::map<std::string, int> per_host;
  std::vector<json::object> provisioned;
  int refused = 0;
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForStatus(harness_->url(), kKey, id, "completed,failed", 240), "completed");
    auto p = Of(id, "sandbox_provisioned");
    auto results = Of(id, "tool_result");
    ASSERT_EQ(results.size(), 1u);
    if (p.empty()) {
      ++refused;
      EXPECT_NE(Str(results[0], "output").find("no sandbox host has room"), std::string::npos)
          << Str(results[0], "output");
      continue;
    }
    ASSERT_EQ(p.size(), 1u);
    ++per_host[Str(p[0], "host_id")];
    EXPECT_FALSE(Str(p[0], "host_address").empty());
    EXPECT_NE(Str(results[0], "output").find("held"), std::string::npos)
        << Str(results[0], "output");
    provisioned.push_back(p[0]);
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(per_host["h1"], 2);
  EXPECT_EQ(per_host["h2"], 2);
  Report(provisioned);
  // The whole provision as the harness saw it (placement, the host's Provision call),
  // from its histogram; the refused one is counted too.
  const std::string metrics = Api("GET", harness_->url() + "/metrics", kKey).body;
  auto value = [&](const std::string& name) {
    auto at = metrics.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size() + 2));
  };
  const double sum = value("sinew_harness_sandbox_provision_seconds_sum");
  const double count = value("sinew_harness_sandbox_provision_seconds_count");
  EXPECT_EQ(count, 5.0);
  if (count > 0)
    std::cout << "whole provision in the harness: mean " << sum / count * 1000 << " ms over "
              << count << "\n";
}

TEST_F(ScaleOutTest, AKilledHostsSessionsGetSandboxLostAndCarryOnElsewhere) {
  StartHosts(2, 0, 2);  // TTL 2 s
  StartHarness(R"({"responses": [
    {"text": "one", "tool_calls": [{"name": "bash", "input": {"command": "echo first > f; cat f"}}]},
    {"text": "two", "delay_ms": 6000, "tool_calls": [{"name": "bash", "input": {"command": "echo second"}}]},
    {"text": "done"}]})");
  const std::string id = NewSession();
  std::vector<json::object> p;
  for (int i = 0; i < 600 && p.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    p = Of(id, "sandbox_provisioned");
  }
  ASSERT_EQ(p.size(), 1u);
  const std::string first_host = Str(p[0], "host_id");
  // Wait for the first result, so the kill falls between the calls.
  for (int i = 0; i < 600 && Of(id, "tool_result").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto victim =
      std::find_if(hosts_.begin(), hosts_.end(), [&](auto& h) { return h->id() == first_host; });
  ASSERT_NE(victim, hosts_.end());
  const auto killed_at = std::chrono::steady_clock::now();
  (*victim)->Kill();
  while (RegisteredHosts() == 2 &&
         std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double gone_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::cout << "host " << first_host << " left etcd " << gone_s << " s after SIGKILL (TTL 2 s)\n";
  EXPECT_EQ(RegisteredHosts(), 1u);

  ASSERT_EQ(WaitForStatus(harness_->url(), kKey, id, "completed,failed", 120), "completed");
  auto lost = Of(id, "sandbox_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(Str(lost[0], "outcome"), "host_lost");
  EXPECT_NE(Str(lost[0], "detail").find(first_host), std::string::npos);
  p = Of(id, "sandbox_provisioned");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(Str(p[1], "host_id"), first_host);
  auto results = Of(id, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].contains("is_error")) << json::serialize(results[1]);
  EXPECT_NE(Str(results[1], "output").find("second"), std::string::npos);
  Report(p);
}

TEST_F(ScaleOutTest, AfterAnEtcdRestartHostsAreRegisteredAndTheHarnessFollowsChanges) {
  StartHosts(2, 0, 3);
  StartHarness(R"({"responses": [
    {"text": "one", "tool_calls": [{"name": "bash", "input": {"command": "echo ok"}}]},
    {"text": "done"}]})");
  etcd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(etcd_->Start());
  // The hosts keep (or re-create) their registrations.
  for (int i = 0; i < 100 && RegisteredHosts() != 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(RegisteredHosts(), 2u);
  // The harness's watch resumed: it sees h1 leave (a clean stop revokes its lease), so a
  // new sandbox goes to h2 although h1 wins ties.
  hosts_[0]->Stop();
  EXPECT_EQ(RegisteredHosts(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string id = NewSession();
  ASSERT_EQ(WaitForStatus(harness_->url(), kKey, id, "completed,failed", 120), "completed");
  auto p = Of(id, "sandbox_provisioned");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(Str(p[0], "host_id"), "h2");
  auto results = Of(id, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].contains("is_error")) << json::serialize(results[0]);
}

// TLS to etcd (docs/security.md): etcd serves only https and requires client
// certificates; a host registers with --etcd-tls-*, the harness watches with etcd_tls, and
// a sandbox is placed on that host and runs the call.
TEST(ScaleOutTlsTest, AHostRegistersAndASandboxIsPlacedOverTlsToEtcd) {
  if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
  testing::TempDir dir;
  testing::MakeCerts(dir.Sub("certs"), {"etcd", "sandboxd", "harness"});
  auto identity = [&](const std::string& name) { return testing::CertFiles(dir.Sub("certs"), name); };
  coord::test::EtcdProcess etcd(coord::test::EtcdTls{identity("etcd"), identity("harness")});
  ASSERT_FALSE(etcd.endpoint().empty()) << "etcd did not start with TLS";
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  const GrpcTlsOptions d = identity("sandboxd");
  SandboxHost host("h1", etcd.endpoint(), 0, 5,
                   {"--etcd-tls-cert", d.cert_file, "--etcd-tls-key", d.key_file, "--etcd-tls-ca", d.ca_file});
  ASSERT_FALSE(host.address.empty()) << "sinew-sandboxd did not start (root, runc, image needed)";
  const std::string script = WriteFile(dir.Sub("script.json"), R"({"responses": [
    {"text": "working", "tool_calls": [{"name": "bash", "input": {"command": "echo placed-over-tls"}}]},
    {"text": "done"}]})");
  const GrpcTlsOptions h = identity("harness");
  HarnessProcess harness(dir.Sub("h.json"), R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address +
                                                R"("}, "sandboxd": {"etcd": ")" + etcd.endpoint() +
                                                R"("}, "api_keys": {")" + std::string(kKey) +
                                                R"(": "t"}, "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                script + R"("}}, "etcd_tls": {"cert_file": ")" + h.cert_file +
                                                R"(", "key_file": ")" + h.key_file + R"(", "ca_file": ")" +
                                                h.ca_file + R"("}})");
  ASSERT_FALSE(harness.address.empty());
  for (int i = 0; i < 300 && Call("GET", harness.url() + "/readyz").status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "work"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 240), "completed");
  std::string host_id, output;
  for (const auto& e : AllEvents(harness.url(), kKey, id)) {
    if (e.contains("sandbox_provisioned")) host_id = Str(e.at("sandbox_provisioned").as_object(), "host_id");
    if (e.contains("tool_result")) output = Str(e.at("tool_result").as_object(), "output");
  }
  EXPECT_EQ(host_id, "h1");
  EXPECT_NE(output.find("placed-over-tls"), std::string::npos) << output;
}

}  // namespace
}  // namespace sinew::harness::test
