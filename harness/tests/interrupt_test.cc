// Interrupts (docs/harness.md, "Interrupts") against real sinew-store and sinew-harness
// processes with scripted models (test doubles of language models): a model call cut
// mid-answer keeps its partial text and the session goes on with the message; a session
// waiting for tool approvals is interrupted; a finished session and bad input are 4xx
// that write nothing; a harness SIGKILLed with an interrupt in the log, unanswered, has
// it answered once by the harness that takes the session over.
#include <sys/stat.h>

#include <csignal>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

constexpr const char* kMessage = "Stop: use the staging database instead";

class InterruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = std::make_unique<TestHttpServer>([](const TestHttpServer::Request& r) {
      TestHttpServer::Response resp;
      resp.content_type = "text/plain";
      resp.body = "echo " + r.target;
      return resp;
    });
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    gate_ = dir_.Sub("gate");
    // The first answer streams a few words, then stalls (a minute, or until the gate).
    WriteFile(dir_.Sub("stall.json"), R"({"responses": [
      {"streamed_before_delay": "I will migrate the production", "text": " database now.", "delay_ms": 60000},
      {"text": "Understood: {{last_user}}"}]})");
    WriteFile(dir_.Sub("gated.json"), R"({"responses": [
      {"text": "Heard: {{last_user}}", "wait_for_file": ")" +
                                          gate_ + R"("}]})");
    WriteFile(dir_.Sub("fetch.json"), R"({"responses": [
      {"text": "Fetching.", "tool_calls": [{"name": "http_request", "input": {"url": ")" +
                                          target_->url() +
                                          R"(/data"}}]},
      {"text": "Understood: {{last_user}}"}]})");
    WriteFile(dir_.Sub("done.json"), R"({"responses": [{"text": "Done."}]})");
    harness_ = std::make_unique<HarnessProcess>(dir_.Sub("h1.json"), Config());
    ASSERT_FALSE(harness_->address.empty()) << "sinew-harness did not start";
    base_ = harness_->url();
  }

  std::string Config() const {
    const std::string d = dir_.path();
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" +
           std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "default_model": "done",
      "models": {"stall": {"kind": "scripted", "script": ")" +
           d + R"(/stall.json"},
                 "gated": {"kind": "scripted", "script": ")" +
           d + R"(/gated.json"},
                 "fetch": {"kind": "scripted", "script": ")" +
           d + R"(/fetch.json"},
                 "done": {"kind": "scripted", "script": ")" +
           d + R"(/done.json"}},
      "http_request": {"allow": [{"host": "127.0.0.1:)" +
           std::to_string(target_->port()) + R"("}]},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300})";
  }

  std::string Submit(const std::string& body) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  Reply Interrupt(const std::string& base, const std::string& id, const std::string& body,
                  const char* key = kKeyA) {
    return Api("POST", base + "/v1/sessions/" + id + "/interrupt", key, body);
  }

  // Polls the log until an event of `type` is in it.
  bool WaitForEvent(const std::string& id, const std::string& type, int timeout_s = 60) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
      if (!OfType(AllEvents(base_, kKeyA, id), type).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  int64_t NextSeq(const std::string& id) {
    auto r = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json.at("session").at("next_seq").as_int64() : -1;
  }

  testing::TempDir dir_;
  std::unique_ptr<TestHttpServer> target_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
  std::string gate_;
};

bool Flag(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

int64_t Int(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_string())
    return std::stoll(std::string(v->as_string()));  // proto JSON: 64-bit as strings
  return 0;
}

// The URL of the harness that drove the session last ("driven by <url>#<pid>-<random>"
// in a status change to running, or the owner of a resume annotation).
std::string DrivenBy(const std::vector<json::object>& events) {
  std::string url;
  for (const auto& e : events) {
    std::string owner;
    if (Str(e, "type") == "status_change") {
      const std::string reason = Str(e.at("status_change").as_object(), "reason");
      if (reason.rfind("driven by ", 0) == 0) owner = reason.substr(10);
    } else if (Str(e, "type") == "annotation") {
      const auto& a = e.at("annotation").as_object();
      if (const auto* labels = a.if_contains("labels"); labels != nullptr && labels->is_object()) {
        if (const auto* o = labels->as_object().if_contains("owner");
            o != nullptr && o->is_string()) {
          owner = std::string(o->as_string());
        }
      }
    }
    if (!owner.empty()) url = owner.substr(0, owner.find('#'));
  }
  return url;
}

// The user messages that answer an interrupt.
std::vector<json::object> Answers(const std::vector<json::object>& events) {
  std::vector<json::object> out;
  for (const auto& m : OfType(events, "user_message")) {
    if (Int(m, "interrupt_seq") != 0) out.push_back(m);
  }
  return out;
}

TEST_F(InterruptTest, AModelCallCutMidAnswerKeepsThePartialTextAndTheSessionGoesOnWithTheMessage) {
  const std::string id = Submit(R"({"prompt": "migrate the database", "model": "stall"})");
  ASSERT_TRUE(WaitForEvent(id, "model_request"));
  auto r = Interrupt(base_, id, json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(r.status, 202) << r.body;
  const int64_t interrupt_seq = r.json.at("interrupt_seq").as_int64();
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto interrupts = OfType(events, "interrupt");
  ASSERT_EQ(interrupts.size(), 1u);
  EXPECT_EQ(interrupts[0].at("message").as_string(), kMessage);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_TRUE(Flag(responses[0], "partial"));
  EXPECT_EQ(responses[0].at("text").as_string(), "I will migrate the production")
      << "only what had streamed";
  EXPECT_EQ(responses[0].at("stop_reason").as_string(), "interrupted");
  auto answers = Answers(events);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(Int(answers[0], "interrupt_seq"), interrupt_seq);
  EXPECT_EQ(answers[0].at("text").as_string(), kMessage);
  // The next call was told: the model's last user message is the interrupt's.
  EXPECT_EQ(responses[1].at("text").as_string(), std::string("Understood: ") + kMessage);
  EXPECT_FALSE(Flag(responses[1], "partial"));
}

TEST_F(InterruptTest, ASessionWaitingForApprovalsGoesOnWithTheMessageAndTheCallDoesNotRun) {
  const std::string id = Submit(
      R"({"prompt": "fetch", "model": "fetch", "approvals": {"tools": {"http_request": "ask"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "requires_action"), "requires_action");
  auto r = Interrupt(base_, id, json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(Flag(results[0], "user_interrupted"));
  EXPECT_NE(std::string(results[0].at("output").as_string()).find("not run"), std::string::npos);
  EXPECT_TRUE(target_->requests().empty()) << "the call that waited for a decision never ran";
  ASSERT_EQ(Answers(events).size(), 1u);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(responses[1].at("text").as_string(), std::string("Understood: ") + kMessage);
  // A decision for the call now is refused: it has its result.
  auto late = Api("POST", base_ + "/v1/sessions/" + id + "/decisions", kKeyA,
                  R"({"decisions": [{"call_id": "call_0_0", "decision": "approve"}]})");
  EXPECT_EQ(late.status, 409) << late.body;
}

TEST_F(InterruptTest, AFinishedSessionIs409AndNothingIsWritten) {
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed"), "completed");
  const int64_t before = NextSeq(id);
  auto r = Interrupt(base_, id, R"({"message": "too late"})");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(ErrorCode(r), "conflict");
  EXPECT_EQ(NextSeq(id), before);
}

TEST_F(InterruptTest, BadInputIsA4xxThatWritesNothing) {
  const std::string id = Submit(R"({"prompt": "migrate", "model": "stall"})");
  ASSERT_TRUE(WaitForEvent(id, "model_request"));
  const int64_t before = NextSeq(id);
  EXPECT_EQ(Interrupt(base_, "0123456789abcdef0123456789abcdef", R"({"message": "x"})").status,
            404);
  EXPECT_EQ(Interrupt(base_, id, R"({"message": "x"})", kKeyB).status, 404)
      << "another tenant's session";
  EXPECT_EQ(Interrupt(base_, id, R"({})").status, 400);
  EXPECT_EQ(Interrupt(base_, id, R"({"message": ""})").status, 400);
  EXPECT_EQ(Interrupt(base_, id, R"({"message": 7})").status, 400);
  EXPECT_EQ(Interrupt(base_, id, R"({"message": "x", "interrupt_seq": 1})").status, 400)
      << "only a harness forwards an interrupt it recorded";
  EXPECT_EQ(Interrupt(base_, id, "not json").status, 400);
  EXPECT_EQ(Call("POST", base_ + "/v1/sessions/" + id + "/interrupt", R"({"message": "x"})",
                 {std::string("Authorization: Bearer ") + kKeyA, "Content-Type: text/plain"})
                .status,
            415);
  EXPECT_EQ(Api("GET", base_ + "/v1/sessions/" + id + "/interrupt", kKeyA).status, 405);
  EXPECT_EQ(NextSeq(id), before);
  EXPECT_EQ(Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyA, "{}").status, 202);
}

// An interrupt sent to a harness that does not drive the session: the event is written
// there and the driving harness is told at once (its model call is cut, not left to run
// its minute).
TEST_F(InterruptTest, AnInterruptSentToAnotherHarnessReachesTheDriverAtOnce) {
  HarnessProcess second(dir_.Sub("h2.json"), Config());
  ASSERT_FALSE(second.address.empty());
  const std::string id = Submit(R"({"prompt": "migrate the database", "model": "stall"})");
  ASSERT_TRUE(WaitForEvent(id, "model_request"));
  const std::string driver = DrivenBy(AllEvents(base_, kKeyA, id));
  const std::string other = driver == harness_->url() ? second.url() : harness_->url();
  ASSERT_NE(driver, other);
  auto r = Interrupt(other, id, json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_TRUE(Flag(responses[0], "partial")) << "the call was cut, not answered";
  EXPECT_EQ(responses[1].at("text").as_string(), std::string("Understood: ") + kMessage);
  EXPECT_EQ(Answers(events).size(), 1u);
  EXPECT_EQ(DrivenBy(events), driver) << "driven where it was all along";
}

// The harness that drives a session is SIGKILLed while its model call is under way; the
// interrupt lands in the log through the other harness, whose message to the dead one
// fails; the survivor takes the session over when the lease ends and answers the
// interrupt, once.
TEST_F(InterruptTest, AnInterruptLeftUnansweredByAKilledHarnessIsAnsweredOnceByTheNext) {
  HarnessProcess second(dir_.Sub("h2.json"), Config());
  ASSERT_FALSE(second.address.empty());
  const std::string id = Submit(R"({"prompt": "first question", "model": "gated"})");
  ASSERT_TRUE(WaitForEvent(id, "model_request"));
  // Whichever harness took it drives it: that one is killed.
  const std::string driver = DrivenBy(AllEvents(base_, kKeyA, id));
  HarnessProcess* victim = driver == harness_->url() ? harness_.get() : &second;
  HarnessProcess* survivor = victim == &second ? harness_.get() : &second;
  ASSERT_EQ(driver, victim->url());
  victim->proc->Signal(SIGKILL);
  victim->proc->Wait();
  base_ = survivor->url();
  auto r = Interrupt(base_, id, json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(r.status, 202) << r.body;
  // Answered by the survivor (the gate keeps its model call waiting until then).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Answers(AllEvents(base_, kKeyA, id)).empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  WriteFile(gate_, "open");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto answers = Answers(events);
  ASSERT_EQ(answers.size(), 1u) << "answered exactly once";
  EXPECT_EQ(Int(answers[0], "interrupt_seq"), r.json.at("interrupt_seq").as_int64());
  EXPECT_EQ(DrivenBy(events), survivor->url()) << "the survivor took the session over";
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].at("text").as_string(), std::string("Heard: ") + kMessage);
}

}  // namespace
}  // namespace sinew::harness::test
