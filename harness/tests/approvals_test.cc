// Tool approvals (docs/harness.md, "Tool approvals") against a real sinew-store and
// sinew-harness processes: ask -> requires_action -> decision; deny policies; the bash
// prefix allow-list; 409s that write nothing; decisions raced on two harnesses; a harness
// SIGKILLed while a session waits; deadlines; bad policies. The target of http_request
// is an HTTP server in the test that counts what reaches it.
#include <csignal>

#include <algorithm>
#include <future>
#include <thread>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

class ApprovalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = std::make_unique<TestHttpServer>([](const TestHttpServer::Request& r) {
      TestHttpServer::Response resp;
      resp.content_type = "text/plain";
      resp.body = "echo " + r.method + " " + r.target;
      return resp;
    });
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    const std::string t = target_->url();
    WriteFile(dir_.Sub("fetch.json"), R"({"responses": [
      {"text": "Fetching.", "tool_calls": [{"name": "http_request", "input": {"url": ")" +
                                          t + R"(/data"}}]},
      {"text": "Done."}]})");
    WriteFile(dir_.Sub("post.json"), R"({"responses": [
      {"text": "Posting.", "tool_calls": [{"name": "http_request", "input": {"method": "POST", "url": ")" +
                                         t +
                                         R"(/orders", "body": "one"}}]},
      {"text": "Done."}]})");
    WriteFile(dir_.Sub("twice.json"), R"({"responses": [
      {"text": "Fetching.", "tool_calls": [{"name": "http_request", "input": {"url": ")" +
                                          t + R"(/first"}}]},
      {"text": "Once more.", "tool_calls": [{"name": "http_request", "input": {"url": ")" +
                                           t + R"(/second"}}]},
      {"text": "Done."}]})");
    WriteFile(dir_.Sub("bash.json"), R"({"responses": [
      {"text": "Two commands.", "tool_calls": [{"name": "bash", "input": {"command": "ls -la /"}},
                                               {"name": "bash", "input": {"command": "ls; rm -rf /tmp/x"}}]},
      {"text": "Done."}]})");
    harness_ = StartHarness("harness.json");
    ASSERT_NE(harness_, nullptr);
    base_ = harness_->url();
  }

  std::string Config() const {
    const std::string d = dir_.path();
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" +
           std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "tenants": {"tenant-b": {"approvals": {"default": "ask"}}},
      "default_model": "fetch",
      "models": {"fetch": {"kind": "scripted", "script": ")" +
           d + R"(/fetch.json"},
                 "post": {"kind": "scripted", "script": ")" +
           d + R"(/post.json"},
                 "twice": {"kind": "scripted", "script": ")" +
           d + R"(/twice.json"},
                 "bash": {"kind": "scripted", "script": ")" +
           d + R"(/bash.json"}},
      "http_request": {"allow": [{"host": "127.0.0.1:)" +
           std::to_string(target_->port()) + R"("}]},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300})";
  }

  std::unique_ptr<HarnessProcess> StartHarness(const std::string& name) {
    auto h = std::make_unique<HarnessProcess>(dir_.Sub(name), Config());
    if (h->address.empty()) return nullptr;
    return h;
  }

  std::string Submit(const std::string& body, const char* key = kKeyA) {
    auto r = Api("POST", base_ + "/v1/sessions", key, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  Reply Decide(const std::string& base, const std::string& id, const std::string& call_id,
               const std::string& decision, const std::string& message = "") {
    json::object d{{"call_id", call_id}, {"decision", decision}};
    if (!message.empty()) d["message"] = message;
    return Api("POST", base + "/v1/sessions/" + id + "/decisions", kKeyA,
               json::serialize(json::object{{"decisions", json::array{d}}}));
  }

  int64_t NextSeq(const std::string& id) {
    auto r = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json.at("session").at("next_seq").as_int64() : -1;
  }

  size_t Requests(const std::string& method) {
    auto all = target_->requests();
    return static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [&](const auto& r) { return r.method == method; }));
  }

  testing::TempDir dir_;
  std::unique_ptr<TestHttpServer> target_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

bool Flag(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

TEST_F(ApprovalsTest, AskPutsTheSessionInRequiresActionAndAnApprovedCallRuns) {
  const std::string id =
      Submit(R"({"prompt": "fetch", "approvals": {"tools": {"http_request": "ask"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  auto shown = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  ASSERT_EQ(shown.status, 200) << shown.body;
  const auto& pending = shown.json.at("session").at("pending_approvals").as_array();
  ASSERT_EQ(pending.size(), 1u) << shown.body;
  EXPECT_EQ(pending[0].at("call_id").as_string(), "call_0_0");
  EXPECT_EQ(pending[0].at("tool_name").as_string(), "http_request");
  EXPECT_NE(std::string(pending[0].at("input_json").as_string()).find("/data"), std::string::npos);
  EXPECT_GT(pending[0].at("deadline_unix_ms").as_int64(),
            pending[0].at("requested_unix_ms").as_int64());
  EXPECT_EQ(Requests("GET"), 0u) << "the call ran before it was approved";
  // The request is on the session's event stream.
  // Seven events: created, the task, running, the model's request and response, the
  // approval request and the status requires_action.
  auto streamed = ReadStream(base_ + "/v1/sessions/" + id + "/events/stream", kKeyA, "", 7, 30000);
  EXPECT_TRUE(std::any_of(streamed.begin(), streamed.end(),
                          [](const SseEvent& e) { return e.type == "approval_requested"; }));

  auto decided = Decide(base_, id, "call_0_0", "approve");
  ASSERT_EQ(decided.status, 200) << decided.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("GET"), 1u);
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events),
            (std::vector<std::string>{"SESSION_STATUS_RUNNING", "SESSION_STATUS_REQUIRES_ACTION",
                                      "SESSION_STATUS_RUNNING", "SESSION_STATUS_COMPLETED"}));
  auto decisions = OfType(events, "approval_decided");
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_TRUE(Flag(decisions[0], "approved"));
  EXPECT_EQ(Str(decisions[0], "by"), "user");
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(Flag(results[0], "is_error"));
  EXPECT_NE(Str(results[0], "output").find("echo GET /data"), std::string::npos);
  // The session is no longer waiting: no pending approvals shown.
  auto after = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  EXPECT_FALSE(after.json.at("session").as_object().contains("pending_approvals")) << after.body;
}

TEST_F(ApprovalsTest, ADeniedCallDoesNotRunAndTheModelReadsTheMessage) {
  const std::string id = Submit(R"({"prompt": "fetch", "approvals": {"default": "ask"}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  auto decided = Decide(base_, id, "call_0_0", "deny", "use the cached copy instead");
  ASSERT_EQ(decided.status, 200) << decided.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("GET"), 0u);
  // The decision is in the tenant's audit log, and in no other tenant's.
  auto audit = Api("GET", base_ + "/v1/audit", kKeyA);
  ASSERT_EQ(audit.status, 200) << audit.body;
  const auto& records = audit.json.at("records").as_array();
  EXPECT_TRUE(std::any_of(records.begin(), records.end(), [&](const json::value& v) {
    return v.at("action").as_string() == "decide" && v.at("session_id").as_string() == id &&
           v.at("detail").as_string() == "call_0_0 denied";
  })) << audit.body;
  auto other = Api("GET", base_ + "/v1/audit", kKeyB);
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(other.body.find(id), std::string::npos) << other.body;
  auto events = AllEvents(base_, kKeyA, id);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(Flag(results[0], "is_error"));
  EXPECT_NE(Str(results[0], "output").find("denied by the user"), std::string::npos)
      << Str(results[0], "output");
  EXPECT_NE(Str(results[0], "output").find("use the cached copy instead"), std::string::npos);
  // The model was asked again after the denial, with the result in its context.
  EXPECT_EQ(OfType(events, "model_request").size(), 2u);
}

TEST_F(ApprovalsTest, ADenyPolicyRefusesTheCallAtOnceWithoutWaiting) {
  const std::string id =
      Submit(R"({"prompt": "fetch", "approvals": {"tools": {"http_request": "deny"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("GET"), 0u);
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_TRUE(OfType(events, "approval_requested").empty());
  EXPECT_EQ(Statuses(events),
            (std::vector<std::string>{"SESSION_STATUS_RUNNING", "SESSION_STATUS_COMPLETED"}));
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(Flag(results[0], "is_error"));
  EXPECT_NE(Str(results[0], "output").find("denied by policy"), std::string::npos)
      << Str(results[0], "output");
}

TEST_F(ApprovalsTest, BashCommandsWithAnAllowedPrefixRunWithoutAskingAndChainedOnesAsk) {
  const std::string id = Submit(
      R"({"prompt": "look", "model": "bash",
          "approvals": {"tools": {"bash": {"policy": "ask", "allow_prefixes": ["ls"]}}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  auto shown = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  const auto& pending = shown.json.at("session").at("pending_approvals").as_array();
  // "ls -la /" is allowed by its prefix; "ls; rm -rf /tmp/x" chains a second command.
  ASSERT_EQ(pending.size(), 1u) << shown.body;
  EXPECT_EQ(pending[0].at("call_id").as_string(), "call_0_1");
  ASSERT_EQ(Decide(base_, id, "call_0_1", "deny").status, 200);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto requested = OfType(events, "approval_requested");
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_EQ(Str(requested[0], "call_id"), "call_0_1");
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  // This harness has no sandboxd: the allowed call went on to the tool, which is not
  // offered here; the other was denied before reaching it.
  EXPECT_NE(Str(results[0], "output").find("not available"), std::string::npos)
      << Str(results[0], "output");
  EXPECT_NE(Str(results[1], "output").find("denied by the user"), std::string::npos)
      << Str(results[1], "output");
}

TEST_F(ApprovalsTest, ADecisionForACallThatIsNotPendingIs409AndWritesNothing) {
  const std::string id =
      Submit(R"({"prompt": "fetch", "approvals": {"tools": {"http_request": "ask"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  int64_t before = NextSeq(id);
  auto unknown = Decide(base_, id, "call_9_9", "approve");
  EXPECT_EQ(unknown.status, 409) << unknown.body;
  EXPECT_EQ(ErrorCode(unknown), "conflict");
  EXPECT_EQ(NextSeq(id), before);
  // A bad decision is a 400 naming the field; another tenant's session a 404.
  auto bad = Decide(base_, id, "call_0_0", "perhaps");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("decision"), std::string::npos);
  auto foreign = Api("POST", base_ + "/v1/sessions/" + id + "/decisions", kKeyB,
                     R"({"decisions": [{"call_id": "call_0_0", "decision": "approve"}]})");
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  EXPECT_EQ(NextSeq(id), before);

  ASSERT_EQ(Decide(base_, id, "call_0_0", "approve").status, 200);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  before = NextSeq(id);
  auto again = Decide(base_, id, "call_0_0", "deny");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(ErrorCode(again), "conflict");
  EXPECT_EQ(NextSeq(id), before);
  EXPECT_EQ(OfType(AllEvents(base_, kKeyA, id), "approval_decided").size(), 1u);
  EXPECT_EQ(Requests("GET"), 1u);
}

// A second answer for a call decided in an earlier turn, once the session asks about
// the next turn's call: still "already approved", not "not waiting" (a client that
// retries its decision learns what happened to it).
TEST_F(ApprovalsTest, ADecisionForACallDecidedInAnEarlierTurnSaysHowItWasDecided) {
  const std::string id =
      Submit(R"({"prompt": "twice", "model": "twice", "approvals": {"default": "ask"}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  ASSERT_EQ(Decide(base_, id, "call_0_0", "approve").status, 200);
  // The first call runs, the model answers with a second call, which asks in turn.
  bool second_asks = false;
  for (int i = 0; i < 600 && !second_asks; ++i) {
    for (const auto& r : OfType(AllEvents(base_, kKeyA, id), "approval_requested")) {
      second_asks = second_asks || Str(r, "call_id") == "call_1_0";
    }
    if (!second_asks) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(second_asks);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  const int64_t before = NextSeq(id);
  auto again = Decide(base_, id, "call_0_0", "deny");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.body.find("already approved"), std::string::npos) << again.body;
  EXPECT_EQ(NextSeq(id), before);
  ASSERT_EQ(Decide(base_, id, "call_1_0", "deny", "not twice").status, 200);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("GET"), 1u);  // the first call ran; the denied second did not
}

TEST_F(ApprovalsTest, DecisionsRacedOnTwoHarnessesForOneCallAreTakenOnce) {
  auto second = StartHarness("second.json");
  ASSERT_NE(second, nullptr);
  const std::string id =
      Submit(R"({"prompt": "post", "model": "post", "approvals": {"default": "ask"}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  // Eight decisions at once, half to each harness, approvals and denials mixed.
  std::vector<std::future<Reply>> sent;
  for (int i = 0; i < 8; ++i) {
    const std::string base = i % 2 == 0 ? base_ : second->url();
    const std::string decision = i % 4 < 2 ? "approve" : "deny";
    sent.push_back(std::async(std::launch::async, [this, base, id, decision] {
      return Decide(base, id, "call_0_0", decision);
    }));
  }
  int ok = 0, conflict = 0;
  for (auto& f : sent) {
    const Reply r = f.get();
    if (r.status == 200) ++ok;
    if (r.status == 409) ++conflict;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(conflict, 7);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto decisions = OfType(events, "approval_decided");
  ASSERT_EQ(decisions.size(), 1u);
  // The call ran exactly when the one decision taken approved it.
  EXPECT_EQ(Requests("POST"), Flag(decisions[0], "approved") ? 1u : 0u);
  EXPECT_EQ(OfType(events, "tool_result").size(), 1u);
}

TEST_F(ApprovalsTest, AHarnessKilledWhileASessionRequiresActionIsRestartedAndTheCallRunsOnce) {
  const std::string id =
      Submit(R"({"prompt": "post", "model": "post", "approvals": {"default": "ask"}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  harness_->proc->Signal(SIGKILL);
  harness_->proc->Wait();
  harness_ = StartHarness("restarted.json");
  ASSERT_NE(harness_, nullptr);
  base_ = harness_->url();
  // The new harness rebuilds the wait from the log.
  auto shown = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(shown.json.at("session").at("status").as_string(), "requires_action");
  ASSERT_EQ(shown.json.at("session").at("pending_approvals").as_array().size(), 1u) << shown.body;
  auto decided = Decide(base_, id, "call_0_0", "approve");
  ASSERT_EQ(decided.status, 200) << decided.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("POST"), 1u);
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(OfType(events, "approval_requested").size(), 1u);
  EXPECT_EQ(OfType(events, "approval_decided").size(), 1u);
  EXPECT_EQ(OfType(events, "tool_call").size(), 1u);
  EXPECT_EQ(OfType(events, "tool_result").size(), 1u);
  EXPECT_EQ(Decide(base_, id, "call_0_0", "approve").status, 409);
}

TEST_F(ApprovalsTest, AnUnansweredRequestIsDeniedAtItsDeadline) {
  const std::string id = Submit(
      R"({"prompt": "fetch", "approvals": {"tools": {"http_request": {"policy": "ask", "ask_timeout_seconds": 1}}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("GET"), 0u);
  auto events = AllEvents(base_, kKeyA, id);
  auto requested = OfType(events, "approval_requested");
  auto decisions = OfType(events, "approval_decided");
  ASSERT_EQ(requested.size(), 1u);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_FALSE(Flag(decisions[0], "approved"));
  EXPECT_EQ(Str(decisions[0], "by"), "timeout");
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(Flag(results[0], "is_error"));
  EXPECT_NE(Str(results[0], "output").find("no decision within 1 s"), std::string::npos)
      << Str(results[0], "output");
  // Too late for a person now.
  EXPECT_EQ(Decide(base_, id, "call_0_0", "approve").status, 409);
}

// The deadline is the one recorded in the request: a harness that takes the session over
// after a SIGKILL keeps it (it does not ask again with a deadline of its own).
TEST_F(ApprovalsTest, ADeadlineHoldsAcrossAHarnessCrash) {
  const std::string id = Submit(
      R"({"prompt": "post", "model": "post", "approvals": {"default": "ask", "ask_timeout_seconds": 2}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  harness_->proc->Signal(SIGKILL);
  harness_->proc->Wait();
  harness_ = StartHarness("restarted.json");
  ASSERT_NE(harness_, nullptr);
  base_ = harness_->url();
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Requests("POST"), 0u);
  auto events = AllEvents(base_, kKeyA, id);
  auto requested = OfType(events, "approval_requested");
  auto decisions = OfType(events, "approval_decided");
  ASSERT_EQ(requested.size(), 1u);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(Str(decisions[0], "by"), "timeout");
  int64_t decided_at = 0;
  for (const auto& e : events) {
    if (e.at("type").as_string() == "approval_decided")
      decided_at = std::stoll(Str(e, "timestamp_unix_ms"));
  }
  EXPECT_GE(decided_at, std::stoll(Str(requested[0], "deadline_unix_ms")));
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(Str(results[0], "output").find("no decision within 2 s"), std::string::npos)
      << Str(results[0], "output");
}

TEST_F(ApprovalsTest, ATenantsDefaultPolicyAppliesAndACancelEndsTheWait) {
  const std::string id = Submit(R"({"prompt": "fetch"})", kKeyB);
  ASSERT_EQ(WaitForStatus(base_, kKeyB, id, "requires_action"), "requires_action");
  ASSERT_EQ(Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyB).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyB, id, "cancelled"), "cancelled");
  auto r = Api("POST", base_ + "/v1/sessions/" + id + "/decisions", kKeyB,
               R"({"decisions": [{"call_id": "call_0_0", "decision": "approve"}]})");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Requests("GET"), 0u);
  // A follow-up message after the cancel: the cancelled call has its result and waits for
  // nothing, so the session goes on to the model and completes.
  ASSERT_EQ(
      Api("POST", base_ + "/v1/sessions/" + id + "/messages", kKeyB, R"({"text": "go on"})").status,
      202);
  ASSERT_EQ(WaitForStatus(base_, kKeyB, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyB, id);
  EXPECT_EQ(OfType(events, "approval_requested").size(), 1u);
  EXPECT_EQ(Requests("GET"), 0u);
}

TEST_F(ApprovalsTest, BadApprovalPoliciesAre400AndCreateNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "approvals": "ask"})", "body.approvals"},
      {R"({"prompt": "x", "approvals": {"default": "maybe"}})", "body.approvals.default"},
      {R"({"prompt": "x", "approvals": {"tools": {"teleport": "ask"}}})", "teleport"},
      {R"({"prompt": "x", "approvals": {"tools": {"bash": "sometimes"}}})",
       "body.approvals.tools.bash"},
      {R"({"prompt": "x", "approvals": {"tools": {"bash": {"allow_prefixes": ["ls"]}}}})",
       "body.approvals.tools.bash.policy"},
      {R"({"prompt": "x", "approvals": {"tools": {"grep": {"policy": "ask", "allow_prefixes": ["ls"]}}}})",
       "allow_prefixes"},
      {R"({"prompt": "x", "approvals": {"tools": {"bash": {"policy": "ask", "allow_prefixes": [""]}}}})",
       "allow_prefixes"},
      {R"({"prompt": "x", "approvals": {"tools": {"http_request": {"policy": "ask", "allow_hosts": ["https://a.b/"]}}}})",
       "allow_hosts"},
      {R"({"prompt": "x", "approvals": {"ask_timeout_seconds": 0}})", "ask_timeout_seconds"},
      {R"({"prompt": "x", "approvals": {"colour": "red"}})", "colour"},
  };
  for (const auto& [body, field] : cases) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument") << body;
    EXPECT_NE(r.body.find(field), std::string::npos) << body << ": " << r.body;
  }
  auto list = Api("GET", base_ + "/v1/sessions", kKeyA);
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.json.at("sessions").as_array().empty()) << list.body;
}

}  // namespace
}  // namespace sinew::harness::test
