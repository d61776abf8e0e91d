// Several harness processes on one sinew-store: each session is driven by one of them
// at a time (leases); a harness that stops answering (SIGSTOP) loses its sessions to
// another once its lease expires, and its late writes, when it wakes up, are refused; one
// that nobody replaced goes on with its work.
#include <gtest/gtest.h>
#include <signal.h>

#include "sinew/session_store/session_store.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "takeover-key";

class TakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    WriteFile(dir_.Sub("quick.json"), R"({"responses": [{"text": "a", "delay_ms": 20}, {"text": "b"}]})");
    WriteFile(dir_.Sub("long.json"), R"({"responses": [{"text": "slow thought", "delay_ms": 3000}]})");
  }
  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t"},
      "models": {"quick": {"kind": "scripted", "script": ")" + dir_.Sub("quick.json") + R"("},
                 "long": {"kind": "scripted", "script": ")" + dir_.Sub("long.json") + R"("}},
      "lease_ttl_ms": 900, "scan_interval_ms": 200})";
  }
  // Submits a session with the slow model on `h` and waits until `h` is inside its model
  // call; returns its id ("" with a test failure when it did not get there).
  std::string SessionInItsModelCall(HarnessProcess& h) {
    auto r = Api("POST", h.url() + "/v1/sessions", kKey, R"({"prompt": "p", "model": "long"})");
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    const std::string id(r.json.at("session").at("id").as_string());
    for (int i = 0; i < 400 && Count(AllEvents(h.url(), kKey, id), "model_request") < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(Count(AllEvents(h.url(), kKey, id), "model_request"), 1);
    return Count(AllEvents(h.url(), kKey, id), "model_request") == 1 ? id : "";
  }
  static int Count(const std::vector<json::object>& events, const char* type) {
    int n = 0;
    for (const auto& e : events) n += e.contains(type) ? 1 : 0;
    return n;
  }
  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
};

TEST_F(TakeoverTest, TwoHarnessesShareTheWorkOneDriverPerSession) {
  HarnessProcess a(dir_.Sub("a.json"), Config());
  HarnessProcess b(dir_.Sub("b.json"), Config());
  ASSERT_FALSE(a.address.empty());
  ASSERT_FALSE(b.address.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    auto r = Api("POST", (i % 2 ? a : b).url() + "/v1/sessions", kKey, R"({"prompt": "p", "model": "quick"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  for (const auto& id : ids) {
    // Either harness answers for any session: the state is all in the store.
    ASSERT_EQ(WaitForStatus(a.url(), kKey, id, "completed"), "completed");
    auto events = AllEvents(b.url(), kKey, id);
    EXPECT_EQ(Count(events, "model_response"), 1) << id;
    EXPECT_EQ(Count(events, "model_request"), 1) << id;
    for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1));
  }
}

TEST_F(TakeoverTest, AStalledHarnessIsTakenOverAndItsLateWriteIsRefused) {
  HarnessProcess a(dir_.Sub("a.json"), Config());
  ASSERT_FALSE(a.address.empty());
  // Once A is inside its model call, freeze it: a zombie holding a lease.
  const std::string id = SessionInItsModelCall(a);
  ASSERT_FALSE(id.empty());
  a.proc->Signal(SIGSTOP);
  HarnessProcess b(dir_.Sub("b.json"), Config());
  ASSERT_FALSE(b.address.empty());
  // B takes the session over once A's lease expires and calls the model again.
  for (int i = 0; i < 1000 && Count(AllEvents(b.url(), kKey, id), "model_request") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(Count(AllEvents(b.url(), kKey, id), "model_request"), 2) << "B did not take over";
  // A wakes up after its model call would have returned, and tries to go on.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  a.proc->Signal(SIGCONT);
  auto refused = a.proc->WaitForLine("fenced out", std::chrono::seconds(20));
  if (!refused) refused = a.proc->WaitForLine("lease lost", std::chrono::seconds(5));
  EXPECT_TRUE(refused.has_value()) << "A should report that its late write was refused";
  ASSERT_EQ(WaitForStatus(b.url(), kKey, id, "completed"), "completed");
  auto events = AllEvents(b.url(), kKey, id);
  EXPECT_EQ(Count(events, "model_response"), 1) << "only B's response may be in the log";
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1));
  // The log says who drove it: A started it, B resumed it.
  int running = 0, resumed = 0;
  for (const auto& e : events) {
    if (e.contains("status_change") && e.at("status_change").at("to").as_string() == "SESSION_STATUS_RUNNING") {
      ++running;
      EXPECT_NE(std::string(e.at("status_change").at("reason").as_string()).find(a.address), std::string::npos);
    }
    if (e.contains("annotation") && e.at("annotation").at("labels").at("kind").as_string() == "resume") {
      ++resumed;
      EXPECT_NE(std::string(e.at("annotation").at("labels").at("owner").as_string()).find(b.address), std::string::npos);
    }
  }
  EXPECT_EQ(running, 1);
  EXPECT_EQ(resumed, 1);
  // B's log tells the recovery at the info level, naming the session.
  auto logged = b.proc->WaitForLine("session " + id + ": resumed by", std::chrono::seconds(5));
  EXPECT_TRUE(logged.has_value()) << "B should log that it resumed the session";
}

// A harness that falls behind (here: frozen past its lease's ttl) while no other harness
// is there to take its sessions keeps driving them: its late renewal is accepted, its
// model call is not thrown away, and the session is not resumed as if it had been lost.
TEST_F(TakeoverTest, AHarnessLateToRenewKeepsTheSessionsNobodyTookFromIt) {
  HarnessProcess a(dir_.Sub("a.json"), Config());
  ASSERT_FALSE(a.address.empty());
  const std::string id = SessionInItsModelCall(a);
  ASSERT_FALSE(id.empty());
  a.proc->Signal(SIGSTOP);
  // Past the 900 ms ttl: the store lets the lease expire, and nobody takes it.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  a.proc->Signal(SIGCONT);
  ASSERT_EQ(WaitForStatus(a.url(), kKey, id, "completed"), "completed");
  auto events = AllEvents(a.url(), kKey, id);
  EXPECT_EQ(Count(events, "model_request"), 1) << "the model call in flight was redone";
  EXPECT_EQ(Count(events, "model_response"), 1);
  for (const auto& e : events) {
    EXPECT_FALSE(e.contains("annotation") && e.at("annotation").at("labels").at("kind").as_string() == "resume")
        << "the session was resumed as if its driver had been lost: " << json::serialize(e);
  }
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1));
}

TEST_F(TakeoverTest, CancelSentToTheOtherHarnessIsForwardedToTheDriver) {
  HarnessProcess a(dir_.Sub("a.json"), Config());
  HarnessProcess b(dir_.Sub("b.json"), Config());
  ASSERT_FALSE(a.address.empty());
  ASSERT_FALSE(b.address.empty());
  auto r = Api("POST", a.url() + "/v1/sessions", kKey, R"({"prompt": "p", "model": "long"})");
  ASSERT_EQ(r.status, 201);
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(b.url(), kKey, id, "running"), "running");
  auto c = Api("POST", b.url() + "/v1/sessions/" + id + "/cancel", kKey);
  EXPECT_EQ(c.status, 202) << c.body;
  EXPECT_EQ(WaitForStatus(b.url(), kKey, id, "cancelled", 30), "cancelled");
  auto events = AllEvents(a.url(), kKey, id);
  EXPECT_EQ(Count(events, "model_response"), 0);  // A's call was abandoned, not finished
}

// The driver's address is data in its lease (Lease.holder_url), so forwarding works for
// whatever URL a harness advertises, https included, and never reads an error message.
TEST_F(TakeoverTest, ForwardingFollowsTheHolderUrlInTheLeaseOverTls) {
  const char* src = SINEW_SOURCE_ROOT;  // for scripts/make-certs.sh
  const std::string certs = dir_.Sub("certs");
  ASSERT_EQ(std::system((std::string(src) + "/scripts/make-certs.sh " + certs + " harness >/dev/null").c_str()), 0);
  TrustCaFile(certs + "/ca.pem");
  std::string config = Config();
  config.insert(config.rfind('}'), R"(, "tls": {"cert_file": ")" + certs + R"(/harness.pem", "key_file": ")" +
                                       certs + R"(/harness-key.pem", "ca_file": ")" + certs + R"(/ca.pem"})");
  HarnessProcess a(dir_.Sub("a.json"), config);
  HarnessProcess b(dir_.Sub("b.json"), config);
  ASSERT_FALSE(a.address.empty());
  ASSERT_FALSE(b.address.empty());
  const std::string url_a = "https://" + a.address, url_b = "https://" + b.address;
  auto r = Api("POST", url_a + "/v1/sessions", kKey, R"({"prompt": "p", "model": "long"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(url_b, kKey, id, "running"), "running");
  // The store names the driver and where it answers.
  auto store = store::ConnectSessionStore(store_->address);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto meta = (*store)->GetSession(id);
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE(meta->has_lease());
  EXPECT_EQ(meta->lease().holder_url(), url_a);
  // A message sent to B reaches A's running driver (202, delivered), then a cancel does.
  auto m = Api("POST", url_b + "/v1/sessions/" + id + "/messages", kKey, R"({"text": "and also"})");
  EXPECT_EQ(m.status, 202) << m.body;
  auto c = Api("POST", url_b + "/v1/sessions/" + id + "/cancel", kKey);
  EXPECT_EQ(c.status, 202) << c.body;
  EXPECT_EQ(WaitForStatus(url_b, kKey, id, "cancelled", 30), "cancelled");
  TrustCaFile("");
}

}  // namespace
}  // namespace sinew::harness::test
