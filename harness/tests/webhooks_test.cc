// Webhooks (docs/harness.md, "Webhooks"): the Standard Webhooks signature against
// python3's hmac and base64; the URL rules; and against real sinew-store and
// sinew-harness processes with a real HTTP receiver in the test: signed deliveries of a
// session's status changes and errors, the event filter, tenant scoping, bad input that
// changes nothing, retries of a failing receiver, and harnesses SIGKILLed mid-delivery.
#include <csignal>
#include <cstdio>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "api_fixture.h"
#include "sinew/harness/config.h"
#include "webhook_signature.h"
#include "webhook_url.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

std::string Python(const std::string& args) {
  const std::string cmd =
      "python3 -c 'import hmac,hashlib,base64,sys; k=base64.b64decode(sys.argv[1][6:]); "
      "print(\"v1,\"+base64.b64encode(hmac.new(k,(sys.argv[2]+\".\"+sys.argv[3]+\".\"+sys.argv[4])."
      "encode(),"
      "hashlib.sha256).digest()).decode())' " +
      args;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char buf[256] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(WebhookSignatureTest, SignaturesAreThoseOfPythonsHmacAndVerifyOnlyTheSignedContent) {
  // The Standard Webhooks example.
  auto known = SignWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                           1614265330, R"({"test": 2432232314})");
  ASSERT_TRUE(known.ok());
  EXPECT_EQ(*known, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  for (int i = 0; i < 3; ++i) {
    auto secret = NewWebhookSecret();
    ASSERT_TRUE(secret.ok());
    ASSERT_EQ(secret->rfind("whsec_", 0), 0u);
    const std::string id = "evt_" + std::to_string(i);
    const std::string body = "{\"n\":" + std::to_string(i) + "}";
    auto sig = SignWebhook(*secret, id, 1700000000 + i, body);
    ASSERT_TRUE(sig.ok());
    EXPECT_EQ(*sig, Python(*secret + " " + id + " " + std::to_string(1700000000 + i) + " '" + body +
                           "'"));
    EXPECT_TRUE(VerifyWebhook(*secret, id, 1700000000 + i, body, *sig));
    EXPECT_TRUE(VerifyWebhook(*secret, id, 1700000000 + i, body, "v1,bm90IGl0 " + *sig));
    EXPECT_FALSE(VerifyWebhook(*secret, id, 1700000000 + i, body + " ", *sig));
    EXPECT_FALSE(VerifyWebhook(*secret, id, 1700000001 + i, body, *sig));
    EXPECT_FALSE(VerifyWebhook(*secret, "evt_x", 1700000000 + i, body, *sig));
  }
  EXPECT_FALSE(SignWebhook("not-a-secret", "a", 1, "b").ok());
  EXPECT_FALSE(SignWebhook("whsec_***", "a", 1, "b").ok());
}

TEST(WebhookUrlTest, LoopbackPrivateLinkLocalAndMappedAddressesAreRefusedUnlessAllowed) {
  const WebhookUrlPolicy none;
  for (const char* url : {"http://127.0.0.1/x",
                          "http://127.1.2.3:8080/",
                          "http://localhost/",
                          "http://a.localhost/",
                          "http://10.1.2.3/",
                          "http://172.16.0.1/",
                          "http://172.31.255.255/",
                          "http://192.168.1.1/",
                          "http://169.254.169.254/latest/meta-data",
                          "http://0.0.0.0/",
                          "http://100.64.0.1/",
                          "http://224.0.0.1/",
                          "http://255.255.255.255/",
                          "http://[::1]/",
                          "http://[::]/",
                          "http://[fe80::1]/",
                          "http://[fd00::1]/",
                          "http://[ff02::1]/",
                          "http://[::ffff:127.0.0.1]/",
                          "http://[::ffff:10.0.0.1]/",
                          "http://[64:ff9b::a00:1]/",
                          "ftp://example.com/",
                          "http://user:pw@example.com/",
                          "example.com",
                          "http://exa mple.com/",
                          ""}) {
    EXPECT_FALSE(CheckWebhookUrl(url, none).ok()) << url;
  }
  for (const char* url : {"https://example.com/hooks", "http://93.184.216.34:8080/x",
                          "http://[2606:4700::1]/", "http://172.32.0.1/", "http://11.0.0.1/"}) {
    EXPECT_TRUE(CheckWebhookUrl(url, none).ok()) << url;
  }
  WebhookUrlPolicy some;
  some.allow = {"10.0.0.0/8", "::1", "hooks.internal", "localhost"};
  EXPECT_TRUE(CheckWebhookUrl("http://10.9.9.9/", some).ok());
  EXPECT_TRUE(CheckWebhookUrl("http://[::1]:9000/", some).ok());
  EXPECT_TRUE(CheckWebhookUrl("http://localhost:9000/", some).ok());
  EXPECT_FALSE(CheckWebhookUrl("http://192.168.0.1/", some).ok());
  EXPECT_FALSE(CheckWebhookUrl("http://127.0.0.1/", some).ok());
  WebhookUrlPolicy all;
  all.allow_private = true;
  EXPECT_TRUE(CheckWebhookUrl("http://127.0.0.1/", all).ok());
  // At send time the name's addresses are checked again.
  auto target = CheckWebhookUrl("http://localhost:9/", some);
  ASSERT_TRUE(target.ok());
  EXPECT_FALSE(ResolveWebhookTarget(*target, none).ok());
  auto pinned = ResolveWebhookTarget(*target, all);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ(pinned->rfind("localhost:9:", 0), 0u) << *pinned;
  for (const char* entry : {"10.0.0.0/33", "10.0.0.0/", "Host", "a b", "1.2.3.4/8x"}) {
    EXPECT_FALSE(CheckWebhookAllowEntry(entry, "x").ok()) << entry;
  }
}

TEST(WebhookConfigTest, WebhookSettingsAreReadAndBadOnesNameTheirField) {
  auto config = [](const std::string& extra) {
    return ParseConfig(
        R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "/x"}})" +
        extra + "}");
  };
  auto good = config(
      R"(, "tenants": {"t": {"webhook_allow_private": true, "webhook_allow": ["10.0.0.0/8", "h.internal"]}},
                          "webhooks": {"retry_initial_ms": 10, "retry_max_ms": 20, "retry_for_seconds": 60,
                                       "poll_ms": 10, "timeout_ms": 500})");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(good->tenants.at("t").webhook_allow_private);
  EXPECT_EQ(good->tenants.at("t").webhook_allow,
            (std::vector<std::string>{"10.0.0.0/8", "h.internal"}));
  EXPECT_EQ(good->webhooks.retry_max_ms, 20u);
  EXPECT_EQ(good->webhooks.retry_for_seconds, 60u);
  const std::pair<const char*, const char*> bad[] = {
      {R"(, "tenants": {"t": {"webhook_allow": ["10.0.0.0/99"]}})",
       "config.tenants.t.webhook_allow[0]"},
      {R"(, "tenants": {"t": {"webhook_allow_private": "yes"}})",
       "config.tenants.t.webhook_allow_private"},
      {R"(, "webhooks": {"retry_initial_ms": 0})", "config.webhooks.retry_initial_ms"},
      {R"(, "webhooks": {"retry_initial_ms": 500, "retry_max_ms": 100})",
       "config.webhooks.retry_initial_ms"},
      {R"(, "webhooks": {"poll_ms": 1})", "config.webhooks.poll_ms"},
      {R"(, "webhooks": {"colour": 1})", "config.webhooks"}};
  for (const auto& [extra, field] : bad) {
    auto parsed = config(extra);
    ASSERT_FALSE(parsed.ok()) << extra;
    EXPECT_NE(parsed.status().message().find(field), std::string::npos)
        << parsed.status().message();
  }
}

// What the receiver got: one entry per request.
struct Received {
  std::string id, timestamp, signature, body, type, path;
  bool signed_ok = false;
};

class WebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    receiver_ = std::make_unique<TestHttpServer>([this](const TestHttpServer::Request& r) {
      TestHttpServer::Response resp;
      std::lock_guard<std::mutex> lock(mu_);
      Received got;
      auto h = [&](const char* k) {
        auto it = r.headers.find(k);
        return it == r.headers.end() ? std::string() : it->second;
      };
      got.id = h("webhook-id");
      got.timestamp = h("webhook-timestamp");
      got.signature = h("webhook-signature");
      got.body = r.body;
      got.path = r.target;
      boost::system::error_code ec;
      auto parsed = json::parse(r.body, ec);
      if (!ec && parsed.is_object()) got.type = Str(parsed.as_object(), "type");
      auto secret = secrets_.find(r.target);
      got.signed_ok = secret != secrets_.end() &&
                      VerifyWebhook(secret->second, got.id, std::atoll(got.timestamp.c_str()),
                                    got.body, got.signature);
      received_.push_back(got);
      int& failures = fail_[r.target];
      if (failures > 0) {
        --failures;
        resp.status = 500;
      }
      resp.delay_ms = delay_ms_.load();
      resp.body = "{}";
      return resp;
    });
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    WriteFile(dir_.Sub("chat.json"), R"({"responses": [{"text": "Done."}], "loop": true})");
    WriteFile(dir_.Sub("asks.json"),
              R"({"responses": [{"text": "May I?", "tool_calls": [{"name": "http_request",
                  "input": {"url": "http://127.0.0.1:1/x"}}]}, {"text": "Done."}]})");
    harness_ = Start("harness.json");
    ASSERT_NE(harness_, nullptr);
    base_ = harness_->url();
  }

  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" +
           std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "default_model": "chat",
      "models": {"chat": {"kind": "scripted", "script": ")" +
           dir_.path() + R"(/chat.json"},
                 "asks": {"kind": "scripted", "script": ")" +
           dir_.path() + R"(/asks.json"},
                 "broken": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "max_retries": 0}},
      "http_request": {"allow": [{"host": "127.0.0.1:1"}]},
      "tenants": {"tenant-a": {"webhook_allow": ["127.0.0.1"]}},
      "webhooks": {"retry_initial_ms": 100, "retry_max_ms": 400, "poll_ms": 50, "timeout_ms": 1000},
      "lease_ttl_ms": 3000, "scan_interval_ms": 300})";
  }

  std::unique_ptr<HarnessProcess> Start(const std::string& name) {
    auto h = std::make_unique<HarnessProcess>(dir_.Sub(name), Config());
    if (h->address.empty()) return nullptr;
    return h;
  }

  // Creates an endpoint of tenant-a at the receiver's `path`; returns its id.
  std::string CreateEndpoint(const std::string& path, const std::string& events_json = "") {
    const std::string body = R"({"url": ")" + receiver_->url() + path + R"(")" +
                             (events_json.empty() ? "" : R"(, "events": )" + events_json) + "}";
    auto r = Api("POST", base_ + "/v1/webhooks", kKeyA, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    const auto& w = r.json.at("webhook").as_object();
    std::lock_guard<std::mutex> lock(mu_);
    secrets_[path] = std::string(w.at("secret").as_string());
    return std::string(w.at("id").as_string());
  }

  std::string Submit(const std::string& body) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json.at("session").at("id").as_string()) : "";
  }

  std::vector<Received> Got(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Received> out;
    for (const auto& g : received_) {
      if (g.path == path) out.push_back(g);
    }
    return out;
  }

  // The webhook ids the session's log calls for (its status changes and errors).
  std::set<std::string> Expected(const std::string& id, bool errors = true) {
    std::set<std::string> out;
    for (const auto& e : AllEvents(base_, kKeyA, id)) {
      const std::string type = Str(e, "type");
      if (type == "status_change" || (errors && type == "error"))
        out.insert("evt_" + id + "_" + Str(e, "seq"));
    }
    return out;
  }

  // Waits until `path` received every id of `ids` (a 2xx answer each); false after 60 s.
  bool WaitForAll(const std::string& path, const std::set<std::string>& ids) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      std::set<std::string> got;
      for (const auto& g : Got(path)) got.insert(g.id);
      if (std::includes(got.begin(), got.end(), ids.begin(), ids.end())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  testing::TempDir dir_;
  std::unique_ptr<TestHttpServer> receiver_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
  std::mutex mu_;
  std::vector<Received> received_;              // guarded by mu_
  std::map<std::string, std::string> secrets_;  // path -> secret; guarded by mu_
  std::map<std::string, int> fail_;             // path -> 500s still to answer; guarded by mu_
  std::atomic<int> delay_ms_{0};
};

TEST_F(WebhooksTest, ASessionsStatusChangesReachARealReceiverSignedAndAreInTheDeliveryLog) {
  const std::string hook = CreateEndpoint("/all");
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const auto expected = Expected(id);
  ASSERT_GE(expected.size(), 2u);  // running, completed
  ASSERT_TRUE(WaitForAll("/all", expected));
  for (const auto& g : Got("/all")) {
    EXPECT_TRUE(g.signed_ok) << g.id;
    EXPECT_EQ(g.type, "session.status_changed");
    auto body = json::parse(g.body).as_object();
    EXPECT_EQ(Str(body, "id"), g.id);
    EXPECT_EQ(Str(body.at("data").as_object(), "session_id"), id);
  }
  std::set<std::string> statuses;
  for (const auto& g : Got("/all"))
    statuses.insert(Str(json::parse(g.body).at("data").as_object(), "to"));
  EXPECT_EQ(statuses, (std::set<std::string>{"running", "completed"}));

  // The delivery log: one entry per event, delivered.
  json::array deliveries;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto r = Api("GET", base_ + "/v1/webhooks/" + hook + "/deliveries", kKeyA);
    ASSERT_EQ(r.status, 200) << r.body;
    deliveries = r.json.at("deliveries").as_array();
    if (deliveries.size() >= expected.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(deliveries.size(), expected.size());
  for (const auto& d : deliveries) {
    EXPECT_EQ(Str(d.as_object(), "state"), "delivered") << json::serialize(d);
    EXPECT_EQ(d.at("last_status_code").as_int64(), 200);
    EXPECT_TRUE(expected.count(Str(d.as_object(), "event_id")));
  }
  // Listed and shown without the secret.
  auto list = Api("GET", base_ + "/v1/webhooks", kKeyA);
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.json.at("webhooks").as_array().size(), 1u);
  EXPECT_EQ(list.json.at("webhooks").at(0).as_object().count("secret"), 0u);
  auto one = Api("GET", base_ + "/v1/webhooks/" + hook, kKeyA);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json.at("webhook").as_object().count("secret"), 0u);
}

TEST_F(WebhooksTest, AnEndpointGetsOnlyTheEventTypesItAskedFor) {
  CreateEndpoint("/all");
  CreateEndpoint("/errors", R"(["session.error"])");
  const std::string id = Submit(R"({"prompt": "hello", "model": "broken"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "failed"), "failed");
  const auto all = Expected(id);
  const auto errors = Expected(id, false);
  std::set<std::string> error_ids;
  std::set_difference(all.begin(), all.end(), errors.begin(), errors.end(),
                      std::inserter(error_ids, error_ids.end()));
  ASSERT_EQ(error_ids.size(), 1u);
  ASSERT_TRUE(WaitForAll("/all", all));
  ASSERT_TRUE(WaitForAll("/errors", error_ids));
  for (const auto& g : Got("/errors")) {
    EXPECT_EQ(g.type, "session.error") << g.body;
    auto data = json::parse(g.body).at("data").as_object();
    EXPECT_EQ(Str(data, "code"), "model_error");
  }

  // A tool call waiting for a decision: its status change is session.requires_action, sent
  // to the endpoint that asked for that type alone and to the one that takes all.
  CreateEndpoint("/asks", R"(["session.requires_action"])");
  const std::string asking = Submit(
      R"({"prompt": "fetch", "model": "asks", "approvals": {"tools": {"http_request": "ask"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, asking, "requires_action"), "requires_action");
  std::set<std::string> waiting;
  for (const auto& e : AllEvents(base_, kKeyA, asking)) {
    const auto* change = e.if_contains("status_change");
    if (change != nullptr && Str(change->as_object(), "to") == "SESSION_STATUS_REQUIRES_ACTION") {
      waiting.insert("evt_" + asking + "_" + Str(e, "seq"));
    }
  }
  ASSERT_EQ(waiting.size(), 1u);
  ASSERT_TRUE(WaitForAll("/asks", waiting));
  ASSERT_TRUE(WaitForAll("/all", waiting));
  for (const auto& g : Got("/asks")) {
    EXPECT_EQ(g.type, "session.requires_action") << g.body;
    EXPECT_EQ(Str(json::parse(g.body).at("data").as_object(), "to"), "requires_action");
  }
}

TEST_F(WebhooksTest, AReceiverThatFailsIsRetriedWithTheSameIdAndTheLogShowsEachAttempt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fail_["/flaky"] = 2;
  }
  const std::string hook = CreateEndpoint("/flaky", R"(["session.status_changed"])");
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const auto expected = Expected(id);
  ASSERT_TRUE(WaitForAll("/flaky", expected));
  // Two attempts were refused; each refused event was sent again with the same id, and
  // the delivery log counts every attempt of each.
  json::array deliveries;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto r = Api("GET", base_ + "/v1/webhooks/" + hook + "/deliveries", kKeyA);
    ASSERT_EQ(r.status, 200) << r.body;
    deliveries = r.json.at("deliveries").as_array();
    bool done = deliveries.size() == expected.size();
    for (const auto& d : deliveries) done = done && Str(d.as_object(), "state") == "delivered";
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(deliveries.size(), expected.size());
  auto got = Got("/flaky");
  std::map<std::string, int64_t> per_id;
  for (const auto& g : got) ++per_id[g.id];
  EXPECT_EQ(got.size(), expected.size() + 2);
  for (const auto& d : deliveries) {
    const std::string event = Str(d.as_object(), "event_id");
    EXPECT_EQ(Str(d.as_object(), "state"), "delivered");
    EXPECT_EQ(d.at("attempts").as_int64(), per_id[event]) << event;
    EXPECT_EQ(d.at("last_status_code").as_int64(), 200);
  }
}

TEST_F(WebhooksTest, AnotherTenantsEndpointIs404AndBadInputIs400AndChangesNothing) {
  const std::string hook = CreateEndpoint("/mine");
  for (const char* method : {"GET", "DELETE"}) {
    EXPECT_EQ(Api(method, base_ + "/v1/webhooks/" + hook, kKeyB).status, 404);
  }
  EXPECT_EQ(Api("GET", base_ + "/v1/webhooks/" + hook + "/deliveries", kKeyB).status, 404);
  EXPECT_EQ(Api("GET", base_ + "/v1/webhooks", kKeyB).json.at("webhooks").as_array().size(), 0u);
  const std::string local = receiver_->url();
  for (const std::string& body :
       {std::string(R"({"url": ")") + local + R"(/x"})",  // tenant-b may not use loopback
        std::string(R"({"url": "http://10.0.0.1/x"})"),
        std::string(R"({"url": "http://[::1]:80/"})"),
        std::string(R"({"url": "http://169.254.169.254/"})"),
        std::string(R"({"url": "file:///etc/passwd"})"),
        std::string(R"({"url": "https://example.com/", "events": ["session.created"]})"),
        std::string(R"({"url": "https://example.com/", "events": []})"),
        std::string(R"({"url": "https://example.com/", "colour": "red"})"),
        std::string(R"({"events": []})"), std::string(R"({"url": 7})"), std::string("not json")}) {
    auto r = Api("POST", base_ + "/v1/webhooks", kKeyB, body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
    EXPECT_EQ(Str(r.json.at("error").as_object(), "code"), "invalid_argument") << r.body;
  }
  EXPECT_EQ(Api("GET", base_ + "/v1/webhooks", kKeyB).json.at("webhooks").as_array().size(), 0u);
  EXPECT_EQ(Api("GET", base_ + "/v1/webhooks/nothex", kKeyA).status, 404);
  EXPECT_EQ(Api("PUT", base_ + "/v1/webhooks/" + hook, kKeyA).status, 405);
  // The owner deletes it; then it is gone for the owner too.
  EXPECT_EQ(Api("DELETE", base_ + "/v1/webhooks/" + hook, kKeyA).status, 200);
  EXPECT_EQ(Api("GET", base_ + "/v1/webhooks/" + hook, kKeyA).status, 404);
  EXPECT_EQ(Api("DELETE", base_ + "/v1/webhooks/" + hook, kKeyA).status, 404);
}

// Two harnesses deliver in turn (one holds the webhook lease); the one sending is
// SIGKILLed again and again while the receiver holds a delivery, and restarted. Every
// event reaches the receiver; an event that arrives twice has the same id and body.
TEST_F(WebhooksTest, HarnessesKilledMidDeliveryLoseNoEventAndRepeatOnlyWithTheSameId) {
  auto second = Start("second.json");
  ASSERT_NE(second, nullptr);
  CreateEndpoint("/crash", R"(["session.status_changed"])");
  delay_ms_ = 300;  // a delivery is under way for a while: the kills land in one
  std::vector<std::string> ids;
  std::unique_ptr<HarnessProcess>* harnesses[] = {&harness_, &second};
  for (int round = 0; round < 4; ++round) {
    ids.push_back(Submit(R"({"prompt": "hello"})"));
    ids.push_back(Submit(R"({"prompt": "hello"})"));
    // Wait for a delivery to begin, then kill one of the two harnesses (the sender half
    // of the time) and start a new one in its place.
    const size_t before = Got("/crash").size();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (Got("/crash").size() == before && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto& victim = *harnesses[round % 2];
    victim->proc->Signal(SIGKILL);
    victim->proc->Wait();
    victim = Start("restart" + std::to_string(round) + ".json");
    ASSERT_NE(victim, nullptr);
    base_ = (*harnesses[(round + 1) % 2])->url();
  }
  delay_ms_ = 0;
  std::set<std::string> expected;
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
    auto e = Expected(id);
    expected.insert(e.begin(), e.end());
  }
  ASSERT_TRUE(WaitForAll("/crash", expected));
  std::map<std::string, std::string> body_of;
  size_t repeats = 0;
  for (const auto& g : Got("/crash")) {
    EXPECT_TRUE(g.signed_ok) << g.id;
    EXPECT_TRUE(expected.count(g.id)) << "not an event of the logs: " << g.id;
    auto [it, fresh] = body_of.emplace(g.id, g.body);
    if (!fresh) {
      ++repeats;
      EXPECT_EQ(it->second, g.body) << "a repeat of " << g.id << " with another body";
    }
  }
  std::printf("%zu events, %zu deliveries repeated after a kill\n", expected.size(), repeats);
}

}  // namespace
}  // namespace sinew::harness::test
