// Interrupts of tool calls in real runc sandboxes (docs/harness.md, "Interrupts"):
// sinew-store, sinew-sandboxd and sinew-harness as processes, the scripted model (a test
// double of a language model) running `sleep 1000` in bash. The interrupt stops it (its
// process group killed), the result says so, and the model is told the message; a
// harness SIGKILLed during the call leaves the interrupt to the harness that takes over.
#include <gtest/gtest.h>
#include <signal.h>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "interrupt-key";
constexpr const char* kMessage = "Stop waiting and list the files instead";

class InterruptSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    sandboxd_ = std::make_unique<SandboxdProcess>();
    ASSERT_FALSE(sandboxd_->address.empty())
        << "sinew-sandboxd did not start (root, runc and the image needed)";
    script_ = WriteFile(dir_.Sub("sleep.json"), R"({"responses": [
      {"text": "Waiting.", "tool_calls": [{"name": "bash", "input": {"command": "echo started; sleep 1000", "timeout": 1800}}]},
      {"text": "Heard: {{last_user}}"}]})");
  }

  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" +
           sandboxd_->address + R"("},
      "api_keys": {")" +
           std::string(kKey) + R"(": "t"},
      "models": {"scripted": {"kind": "scripted", "script": ")" +
           script_ + R"("}},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300})";
  }

  // Polls the log until an event of `type` is in it.
  static bool WaitForEvent(const std::string& base, const std::string& id,
                           const std::string& type) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < until) {
      if (!OfType(AllEvents(base, kKey, id), type).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The session's one tool result is the stopped sleep, the interrupt is answered once, and
  // the model's next answer heard the message.
  static void ExpectStoppedAndTold(const std::string& base, const std::string& id) {
    auto events = AllEvents(base, kKey, id);
    auto results = OfType(events, "tool_result");
    ASSERT_EQ(results.size(), 1u);
    const json::object& r = results[0];
    EXPECT_TRUE(r.contains("user_interrupted") && r.at("user_interrupted").as_bool())
        << json::serialize(r);
    const std::string output(r.at("output").as_string());
    EXPECT_NE(output.find("interrupted by the user"), std::string::npos) << output;
    EXPECT_NE(output.find("process group was killed"), std::string::npos) << output;
    size_t answers = 0;
    for (const auto& m : OfType(events, "user_message"))
      answers += m.contains("interrupt_seq") ? 1 : 0;
    EXPECT_EQ(answers, 1u);
    auto responses = OfType(events, "model_response");
    ASSERT_EQ(responses.size(), 2u);
    EXPECT_EQ(responses[1].at("text").as_string(), std::string("Heard: ") + kMessage);
  }

  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<SandboxdProcess> sandboxd_;
  std::string script_;
};

TEST_F(InterruptSandboxTest, AnInterruptStopsALongBashAndTheSessionGoesOnWithTheMessage) {
  HarnessProcess harness(dir_.Sub("h.json"), Config());
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "wait a while"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_TRUE(WaitForEvent(harness.url(), id, "tool_call"));
  auto i = Api("POST", harness.url() + "/v1/sessions/" + id + "/interrupt", kKey,
               json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(i.status, 202) << i.body;
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed,cancelled", 180), "completed");
  ExpectStoppedAndTold(harness.url(), id);
}

TEST_F(InterruptSandboxTest, AnInterruptOfAHarnessKilledDuringALongBashIsCarriedOutByTheNext) {
  HarnessProcess first(dir_.Sub("h1.json"), Config());
  HarnessProcess second(dir_.Sub("h2.json"), Config());
  ASSERT_FALSE(first.address.empty());
  ASSERT_FALSE(second.address.empty());
  auto r = Api("POST", first.url() + "/v1/sessions", kKey, R"({"prompt": "wait a while"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_TRUE(WaitForEvent(first.url(), id, "tool_call"));
  // Whichever harness took it drives it (the status change to running names it): that one
  // is killed, and the interrupt goes to the other.
  std::string driver;
  for (const auto& c : OfType(AllEvents(first.url(), kKey, id), "status_change")) {
    const std::string reason = Str(c, "reason");
    if (reason.rfind("driven by ", 0) == 0) driver = reason.substr(10, reason.find('#') - 10);
  }
  HarnessProcess* victim = driver == first.url() ? &first : &second;
  HarnessProcess* survivor = victim == &first ? &second : &first;
  ASSERT_EQ(driver, victim->url());
  victim->proc->Signal(SIGKILL);
  victim->proc->Wait();
  auto i = Api("POST", survivor->url() + "/v1/sessions/" + id + "/interrupt", kKey,
               json::serialize(json::object{{"message", kMessage}}));
  ASSERT_EQ(i.status, 202) << i.body;
  ASSERT_EQ(WaitForStatus(survivor->url(), kKey, id, "completed,failed,cancelled", 180),
            "completed");
  ExpectStoppedAndTold(survivor->url(), id);
}

}  // namespace
}  // namespace sinew::harness::test
