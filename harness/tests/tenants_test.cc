// Tenants against a real store and harness: hashed API keys and rotation through the
// keys file without a restart; each quota answered 429 with Retry-After and leaving no
// trace; cancel, fork, import and export in the tenant audit log; the key in no event or log.
#include <filesystem>

#include "api_fixture.h"
#include "api_keys.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

inline constexpr const char* kOldKey = "key-tenant-c-old";
inline constexpr const char* kNewKey = "key-tenant-c-new";

class TenantsTest : public ApiFixture {
 protected:
  // The fixture's config with tenant-a's key stored hashed, tenant-c's keys in a keys
  // file, and `tenants` as given; a second harness on the same store serves it.
  void StartTenantHarness(const std::string& tenants_json) {
    ReplaceKeysFile(std::string(R"({")") + HashApiKey(kOldKey) + R"(": "tenant-c"})");
    std::string config = Config();
    const size_t start = config.find(R"("api_keys": {)");
    const size_t end = config.find("},", start) + 2;
    config.replace(start, end - start,
                   R"("api_keys": {")" + HashApiKey(kKeyA) + R"(": "tenant-a", ")" + kKeyB +
                       R"(": "tenant-b"}, "api_keys_file": ")" + dir_.Sub("keys.json") +
                       R"(", "tenants": )" + tenants_json + ",");
    tenant_harness_ = std::make_unique<HarnessProcess>(dir_.Sub("tenant-harness.json"), config);
    ASSERT_FALSE(tenant_harness_->address.empty()) << "sinew-harness did not start:\n" << config;
    url_ = tenant_harness_->url();
  }

  // As an operator rotates keys: a new file renamed over the old one.
  void ReplaceKeysFile(const std::string& text) {
    WriteFile(dir_.Sub("keys.json.new"), text);
    std::filesystem::rename(dir_.Sub("keys.json.new"), dir_.Sub("keys.json"));
  }

  // Tenant-a's sessions, read through the fixture's harness (no quotas there).
  size_t SessionsOfA() {
    auto r = Api("GET", base_ + "/v1/sessions?limit=1000", kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json.at("sessions").as_array().size() : 0;
  }

  // What the tenant harness has logged so far (its stdout), read until it pauses.
  std::string LogSoFar() {
    std::string out;
    while (auto line = tenant_harness_->proc->ReadLine(std::chrono::milliseconds(300)))
      out += *line + "\n";
    return out;
  }

  static void Expect429(const Reply& r, const std::string& code) {
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(ErrorCode(r), code);
    const std::string retry = r.Header("retry-after");
    ASSERT_FALSE(retry.empty()) << "no Retry-After on " << r.body;
    EXPECT_EQ(retry.find_first_not_of("0123456789"), std::string::npos) << retry;
    EXPECT_GE(std::stoul(retry), 1u);
  }

  // The events of `id` that are audit events.
  std::vector<json::object> Audits(const std::string& id) {
    std::vector<json::object> out;
    for (auto& e : AllEvents(base_, kKeyA, id)) {
      if (e.contains("audit")) out.push_back(e.at("audit").as_object());
    }
    return out;
  }

  void ExpectAudit(const json::object& a, const std::string& action) {
    EXPECT_EQ(a.at("action").as_string(), action);
    EXPECT_EQ(a.at("tenant").as_string(), "tenant-a");
    EXPECT_EQ(a.at("key_id").as_string(), Sha256Hex(kKeyA).substr(0, kKeyIdDigits));
    EXPECT_EQ(std::string(a.at("remote_address").as_string()).rfind("127.0.0.1:", 0), 0u)
        << json::serialize(a);
    ASSERT_TRUE(a.contains("time_unix_ms"));
    // A string in events (proto JSON), a number in GET /v1/audit.
    const auto& t = a.at("time_unix_ms");
    EXPECT_GT(t.is_string() ? std::stoll(std::string(t.as_string())) : t.to_number<int64_t>(), 0);
  }

  std::unique_ptr<HarnessProcess> tenant_harness_;
  std::string url_;
};

TEST_F(TenantsTest, HashedKeysAuthenticateAndTheKeysFileRotatesWithoutARestart) {
  StartTenantHarness("{}");
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kKeyA).status, 200);  // stored hashed
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kKeyB).status, 200);  // plaintext: still accepted
  auto wrong = Api("GET", url_ + "/v1/sessions", "key-tenant-a-wrong");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "unauthenticated");
  // The hash is not a key.
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", HashApiKey(kKeyA)).status, 401);
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kOldKey).status, 200);
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kNewKey).status, 401);
  // Rotation, same process: both keys during the window, then the new one alone.
  ReplaceKeysFile(R"({")" + HashApiKey(kOldKey) + R"(": "tenant-c", ")" + HashApiKey(kNewKey) +
                  R"(": "tenant-c"})");
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kOldKey).status, 200);
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kNewKey).status, 200);
  ReplaceKeysFile(R"({")" + HashApiKey(kNewKey) + R"(": "tenant-c"})");
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kOldKey).status, 401);
  auto created = Api("POST", url_ + "/v1/sessions", kNewKey, R"({"prompt": "after rotation"})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json.at("session").at("tenant").as_string(), "tenant-c");
  // A file that no longer parses keeps the keys read before.
  ReplaceKeysFile("{broken");
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kNewKey).status, 200);
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kOldKey).status, 401);
  // The log tells the operator, and names no key.
  const std::string log = LogSoFar();
  EXPECT_NE(log.find("re-read"), std::string::npos) << log;
  EXPECT_NE(log.find("cannot be used"), std::string::npos) << log;
  for (const char* key : {kKeyA, kKeyB, kOldKey, kNewKey})
    EXPECT_EQ(log.find(key), std::string::npos) << key;
}

TEST_F(TenantsTest, RequestsPerSecondIs429WithRetryAfterAndLeavesNoTrace) {
  // A bucket of one request that refills in 1000 s.
  StartTenantHarness(R"({"tenant-a": {"requests_per_second": 0.001}})");
  auto first = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "one", "model": "nop"})");
  ASSERT_EQ(first.status, 201) << first.body;
  auto second = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "two", "model": "nop"})");
  Expect429(second, "rate_limited");
  EXPECT_EQ(second.Header("retry-after"), "1000");
  Expect429(Api("GET", url_ + "/v1/sessions", kKeyA), "rate_limited");
  // The event stream is a request too.
  Expect429(Api("GET",
                url_ + "/v1/sessions/" +
                    std::string(first.json.at("session").at("id").as_string()) + "/events/stream",
                kKeyA),
            "rate_limited");
  EXPECT_EQ(SessionsOfA(), 1u);  // the refused create left nothing
  // Other tenants are not limited.
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kKeyB).status, 200);
  EXPECT_EQ(Api("GET", url_ + "/v1/sessions", kKeyB).status, 200);
}

TEST_F(TenantsTest, ConcurrentSessionsAre429UntilOneEnds) {
  StartTenantHarness(R"({"tenant-a": {"max_concurrent_sessions": 1}})");
  auto busy = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "wait", "model": "stuck"})");
  ASSERT_EQ(busy.status, 201) << busy.body;
  const std::string id(busy.json.at("session").at("id").as_string());
  auto refused = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "more", "model": "nop"})");
  Expect429(refused, "quota_exceeded");
  auto fork = Api("POST", url_ + "/v1/sessions/" + id + "/fork", kKeyA, R"({"at_seq": 1})");
  Expect429(fork, "quota_exceeded");
  EXPECT_EQ(SessionsOfA(), 1u);
  // Tenant b has no quota.
  EXPECT_EQ(Api("POST", url_ + "/v1/sessions", kKeyB, R"({"prompt": "b", "model": "nop"})").status,
            201);
  // When the running one ends, the next is admitted.
  ASSERT_EQ(Api("POST", url_ + "/v1/sessions/" + id + "/cancel", kKeyA).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "cancelled"), "cancelled");
  auto admitted = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "now", "model": "nop"})");
  EXPECT_EQ(admitted.status, 201) << admitted.body;
  EXPECT_EQ(SessionsOfA(), 2u);
}

TEST_F(TenantsTest, OverTokensPerMinuteModelCallsWaitAndNewSessionsAre429) {
  // "basic" answers twice; its first answer uses more than one token.
  StartTenantHarness(R"({"tenant-a": {"tokens_per_minute": 1}})");
  const auto created = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "fetch it"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  // The second model call waits, and says so in the log; the session is not failed.
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    for (const auto& e : AllEvents(base_, kKeyA, id)) {
      if (e.contains("annotation") &&
          e.at("annotation").at("labels").at("kind").as_string() == "quota_wait") {
        waiting = true;
      }
    }
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(waiting) << "no quota_wait annotation";
  size_t requests = 0;
  for (const auto& e : AllEvents(base_, kKeyA, id)) requests += e.contains("model_request") ? 1 : 0;
  EXPECT_EQ(requests, 1u);
  EXPECT_EQ(
      Api("GET", base_ + "/v1/sessions/" + id, kKeyA).json.at("session").at("status").as_string(),
      "running");
  const size_t before = SessionsOfA();
  auto refused = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "more"})");
  Expect429(refused, "rate_limited");
  EXPECT_LE(std::stoul(refused.Header("retry-after")), 60u);
  EXPECT_EQ(SessionsOfA(), before);
  // Waiting is not stuck: a cancel ends it at once.
  ASSERT_EQ(Api("POST", url_ + "/v1/sessions/" + id + "/cancel", kKeyA).status, 202);
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "cancelled,failed,completed"), "cancelled");
  // Importing uses no model: not refused for tokens.
  auto other = Api("POST", url_ + "/v1/sessions", kKeyB, R"({"prompt": "b", "model": "nop"})");
  EXPECT_EQ(other.status, 201);
}

TEST_F(TenantsTest, CancelForkImportAndExportAreRecordedInTheTenantAuditLog) {
  StartTenantHarness("{}");
  // Cancel (a running session, driven by this harness).
  auto busy = Api("POST", url_ + "/v1/sessions", kKeyA, R"({"prompt": "wait", "model": "stuck"})");
  ASSERT_EQ(busy.status, 201) << busy.body;
  const std::string busy_id(busy.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(base_, kKeyA, busy_id, "running"), "running");
  ASSERT_EQ(Api("POST", url_ + "/v1/sessions/" + busy_id + "/cancel", kKeyA).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, busy_id, "cancelled"), "cancelled");
  auto audits = Audits(busy_id);
  ASSERT_EQ(audits.size(), 1u);
  ExpectAudit(audits[0], "cancel");
  // The audit event comes before the status change it explains.
  auto events = AllEvents(base_, kKeyA, busy_id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_TRUE(events[events.size() - 2].contains("audit") ||
              events[events.size() - 3].contains("audit"));
  EXPECT_EQ(events.back().at("status_change").at("to").as_string(), "SESSION_STATUS_CANCELLED");

  // Fork: the fork's log says so; the source's log is only read.
  const std::string id = Submit(R"({"prompt": "source", "model": "nop"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const size_t length = AllEvents(base_, kKeyA, id).size();
  auto forked = Api("POST", url_ + "/v1/sessions/" + id + "/fork", kKeyA, R"({"at_seq": 2})");
  ASSERT_EQ(forked.status, 201) << forked.body;
  const std::string fork_id(forked.json.at("session").at("id").as_string());
  EXPECT_TRUE(Audits(id).empty());
  auto fork_audits = Audits(fork_id);
  ASSERT_EQ(fork_audits.size(), 1u);
  ExpectAudit(fork_audits[0], "fork");
  EXPECT_EQ(fork_audits[0].at("detail").as_string(), "forked from " + id + " at seq 2");

  // Export: the body is the log, which it leaves as it was.
  auto exported = Call("GET", url_ + "/v1/sessions/" + id + "/export", "",
                       {"Authorization: Bearer " + std::string(kKeyA)});
  ASSERT_EQ(exported.status, 200) << exported.body;
  EXPECT_EQ(static_cast<size_t>(std::count(exported.body.begin(), exported.body.end(), '\n')), length);
  EXPECT_EQ(AllEvents(base_, kKeyA, id).size(), length);

  // Import into a second platform (its own store and harness, the same keys): the log
  // as exported, nothing added.
  StoreProcess other_store(dir_.Sub("db2"));
  std::string config = Config();
  config.replace(config.find(store_->address), store_->address.size(), other_store.address);
  HarnessProcess other(dir_.Sub("harness2.json"), config);
  ASSERT_FALSE(other.address.empty());
  auto imported =
      Call("POST", other.url() + "/v1/sessions/import", exported.body,
           {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/x-ndjson"});
  ASSERT_EQ(imported.status, 201) << imported.body;
  EXPECT_EQ(AllEvents(other.url(), kKeyA, id).size(), length);

  // Every action is in the tenant audit log, oldest first.
  auto records = Api("GET", url_ + "/v1/audit", kKeyA);
  ASSERT_EQ(records.status, 200) << records.body;
  const auto& here = records.json.at("records").as_array();
  ASSERT_EQ(here.size(), 3u) << records.body;
  ExpectAudit(here[0].as_object(), "cancel");
  EXPECT_EQ(here[0].at("session_id").as_string(), busy_id);
  ExpectAudit(here[1].as_object(), "fork");
  EXPECT_EQ(here[1].at("session_id").as_string(), id);
  EXPECT_EQ(here[1].at("detail").as_string(), "forked into " + fork_id + " at seq 2");
  ExpectAudit(here[2].as_object(), "export");
  EXPECT_EQ(here[2].at("session_id").as_string(), id);
  EXPECT_EQ(here[2].at("detail").as_string(), "events 1-" + std::to_string(length));
  auto there = Api("GET", other.url() + "/v1/audit", kKeyA);
  ASSERT_EQ(there.status, 200) << there.body;
  ASSERT_EQ(there.json.at("records").as_array().size(), 1u) << there.body;
  ExpectAudit(there.json.at("records").as_array()[0].as_object(), "import");
  EXPECT_EQ(there.json.at("records").as_array()[0].at("detail").as_string(),
            "imported " + std::to_string(length) + " events");
  // Tenant b sees none of tenant a's records.
  auto b = Api("GET", url_ + "/v1/audit", kKeyB);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_TRUE(b.json.at("records").as_array().empty()) << b.body;

  const std::string log = LogSoFar();
  EXPECT_EQ(log.find(kKeyA), std::string::npos) << log;
  // The key itself is in no event of any of these sessions.
  for (const auto& [base, sid] : std::vector<std::pair<std::string, std::string>>{
           {base_, busy_id}, {base_, id}, {base_, fork_id}, {other.url(), id}}) {
    for (const auto& e : AllEvents(base, kKeyA, sid)) {
      EXPECT_EQ(json::serialize(e).find(kKeyA), std::string::npos) << json::serialize(e);
    }
  }
}

TEST_F(TenantsTest, ExportOfAnotherTenantsSessionIs404AndLeavesNoTrace) {
  StartTenantHarness("{}");
  const std::string id = Submit(R"({"prompt": "mine", "model": "nop"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const size_t length = AllEvents(base_, kKeyA, id).size();
  auto r = Call("GET", url_ + "/v1/sessions/" + id + "/export", "",
                {"Authorization: Bearer " + std::string(kKeyB)});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Call("GET", url_ + "/v1/sessions/" + id + "/export").status, 401);
  EXPECT_EQ(Api("POST", url_ + "/v1/sessions/" + id + "/export", kKeyA).status, 405);
  EXPECT_EQ(AllEvents(base_, kKeyA, id).size(), length);
}

}  // namespace
}  // namespace sinew::harness::test
