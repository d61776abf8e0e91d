// Idle sandboxes (docs/harness.md, "Idle sandboxes") with real runc sandboxes:
// sinew-store, sinew-sandboxd and sinew-harness as processes, the scripted model (a test
// double of a language model) holding its answer until the test opens a gate file, so that
// each test sees the pause happen before the model answers, whatever the machine's speed.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "sinew/sandbox/provisioner_client.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "idle-key";

class IdlePauseTest : public StoreAndSandboxdTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StoreAndSandboxdTest::SetUp());
    auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
    ASSERT_TRUE(prov.ok()) << prov.status().ToString();
    prov_ = std::move(*prov);
  }
  std::string Config(const std::string& script) const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" + sandboxd_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t"},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300,
      "models": {"scripted": {"kind": "scripted", "script": ")" + script + R"("}}})";
  }
  std::string Gate(const std::string& name) { return dir_.Sub(name); }
  static void Open(const std::string& gate) { std::ofstream(gate) << "open\n"; }

  // The id of the session's sandbox, once its first tool call has a result.
  std::string SandboxAfterFirstResult(const std::string& base, const std::string& id) {
    for (int i = 0; i < 3600; ++i) {
      auto events = AllEvents(base, kKey, id);
      auto boxes = OfType(events, "sandbox_provisioned");
      if (!OfType(events, "tool_result").empty() && !boxes.empty()) {
        return std::string(boxes[0].at("sandbox_id").as_string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }
  // Polls sinew-sandboxd until the sandbox is in `state` (false after 3 minutes).
  bool WaitForState(const std::string& box, v1::SandboxState state) {
    for (int i = 0; i < 3600; ++i) {
      auto info = prov_->Get(box);
      if (info.ok() && info->state() == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Reads the harness's log until a line holding `text` (false when it ends first or after
  // 3 minutes).
  static bool WaitForLogLine(HarnessProcess& harness, const std::string& text) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (std::chrono::steady_clock::now() < until) {
      auto line = harness.proc->ReadLine(std::chrono::milliseconds(1000));
      if (line && line->find(text) != std::string::npos) return true;
    }
    return false;
  }
  static std::vector<std::string> Types(const std::vector<json::object>& events) {
    std::vector<std::string> t;
    for (const auto& e : events) t.emplace_back(e.at("type").as_string());
    return t;
  }
  static size_t IndexOf(const std::vector<std::string>& types, const std::string& type, size_t nth = 0) {
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == type && nth-- == 0) return i;
    }
    return types.size();
  }

  std::unique_ptr<sandbox::ProvisionerClient> prov_;
};

// The sandbox idles while the model thinks: it is paused (its container stopped, its files
// kept), the log says so before the model's answer, and the next call resumes the same
// sandbox with the file the first call wrote.
TEST_F(IdlePauseTest, AnIdleSandboxIsPausedWhileTheModelThinksAndTheNextCallResumesIt) {
  const std::string gate = Gate("gate");
  const std::string script = WriteFile(dir_.Sub("idle.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo kept > note"}}]},
    {"text": "", "wait_for_file": ")" + gate + R"(", "tool_calls": [{"name": "bash", "input": {"command": "cat note"}}]},
    {"text": "Read."}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "note", "idle_pause_seconds": 1})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  const std::string box = SandboxAfterFirstResult(harness.url(), id);
  ASSERT_FALSE(box.empty());
  ASSERT_TRUE(WaitForState(box, v1::SANDBOX_STATE_PAUSED)) << "paused while the model holds its answer";
  Open(gate);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  auto paused = OfType(events, "sandbox_paused");
  ASSERT_EQ(paused.size(), 1u);
  EXPECT_EQ(paused[0].at("sandbox_id").as_string(), box);
  EXPECT_EQ(paused[0].at("reason").as_string(), "idle");
  EXPECT_GE(std::stoll(std::string(paused[0].at("idle_ms").as_string())), 1000) << json::serialize(paused[0]);
  auto resumed = OfType(events, "sandbox_resumed");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].at("sandbox_id").as_string(), box);
  EXPECT_TRUE(resumed[0].contains("resume_ms"));
  const auto types = Types(events);
  // request, paused, the answer naming the call; resumed, then the call it was resumed for.
  EXPECT_LT(IndexOf(types, "sandbox_paused"), IndexOf(types, "model_response", 1));
  EXPECT_GT(IndexOf(types, "sandbox_paused"), IndexOf(types, "model_request", 1));
  EXPECT_GT(IndexOf(types, "sandbox_resumed"), IndexOf(types, "model_response", 1));
  EXPECT_LT(IndexOf(types, "sandbox_resumed"), IndexOf(types, "tool_call", 1));
  EXPECT_EQ(OfType(events, "sandbox_provisioned").size(), 1u) << "the same sandbox, not a fresh one";
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].at("output").as_string(), "kept\n") << json::serialize(results[1]);
  // The session's end destroyed it.
  auto info = prov_->Get(box);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), v1::SANDBOX_STATE_ENDED);
}

// A background job keeps its sandbox awake: the idle timer's pause is refused while it runs
// and nothing is paused or frozen; once the job has ended the sandbox idles and is paused.
TEST_F(IdlePauseTest, ABackgroundJobKeepsItsSandboxAwakeUntilItEnds) {
  const std::string first = Gate("first"), second = Gate("second");
  const std::string script = WriteFile(dir_.Sub("job.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "setsid sh -c 'while true; do date +%s%N >> ticks; sleep 0.2; done' >/dev/null 2>&1 </dev/null & echo $! > job.pid; echo started"}}]},
    {"text": "", "wait_for_file": ")" + first + R"(", "tool_calls": [{"name": "bash", "input": {"command": "kill $(cat job.pid); while kill -0 $(cat job.pid) 2>/dev/null; do sleep 0.05; done; wc -l < ticks"}}]},
    {"text": "Done.", "wait_for_file": ")" + second + R"("}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "job", "idle_pause_seconds": 1})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  const std::string box = SandboxAfterFirstResult(harness.url(), id);
  ASSERT_FALSE(box.empty());
  // The timer fired and was refused: the job is running.
  ASSERT_TRUE(WaitForLogLine(harness, "not paused while idle"));
  auto info = prov_->Get(box);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), v1::SANDBOX_STATE_READY);
  Open(first);
  // The second call stops the job; then the sandbox idles and is paused.
  ASSERT_TRUE(WaitForState(box, v1::SANDBOX_STATE_PAUSED));
  Open(second);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  auto paused = OfType(events, "sandbox_paused");
  ASSERT_EQ(paused.size(), 1u) << "only after the job ended";
  const auto types = Types(events);
  EXPECT_GT(IndexOf(types, "sandbox_paused"), IndexOf(types, "tool_result", 1));
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_GT(std::stol(std::string(results[1].at("output").as_string())), 1)
      << "the job kept ticking while the model thought: " << json::serialize(results[1]);
  EXPECT_TRUE(OfType(events, "sandbox_resumed").empty()) << "no call came after the pause";
}

// A tool call waiting for a person's decision: the sandbox idles meanwhile and is paused,
// and the approved call resumes it.
TEST_F(IdlePauseTest, ASandboxIdleWhileAPersonDecidesIsPausedAndTheApprovedCallResumesIt) {
  const std::string script = WriteFile(dir_.Sub("ask.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "write_file", "input": {"path": "note", "content": "first\n"}}]},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "cat note; echo second"}}]},
    {"text": "Done."}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey,
               R"({"prompt": "ask", "idle_pause_seconds": 1,
                   "approvals": {"tools": {"bash": "ask"}}})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "requires_action,completed,failed", 180), "requires_action");
  auto events = AllEvents(harness.url(), kKey, id);
  auto boxes = OfType(events, "sandbox_provisioned");
  ASSERT_EQ(boxes.size(), 1u);
  const std::string box(boxes[0].at("sandbox_id").as_string());
  ASSERT_TRUE(WaitForState(box, v1::SANDBOX_STATE_PAUSED)) << "paused while the person decides";
  auto asked = OfType(events, "approval_requested");
  ASSERT_EQ(asked.size(), 1u);
  json::object d{{"call_id", asked[0].at("call_id")}, {"decision", "approve"}};
  auto decided = Api("POST", harness.url() + "/v1/sessions/" + id + "/decisions", kKey,
                     json::serialize(json::object{{"decisions", json::array{d}}}));
  ASSERT_EQ(decided.status, 200) << decided.body;
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  events = AllEvents(harness.url(), kKey, id);
  ASSERT_EQ(OfType(events, "sandbox_paused").size(), 1u);
  ASSERT_EQ(OfType(events, "sandbox_resumed").size(), 1u);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].at("output").as_string(), "first\nsecond\n") << json::serialize(results[1]);
}

// A harness SIGKILLed while the model thinks, after the idle timer paused the sandbox and
// before the pause could be logged: the harness that takes the session over asks the model
// again, and its first call resumes the paused sandbox (logged as sandbox_resumed), with
// its files.
TEST_F(IdlePauseTest, AHarnessKilledWithItsSandboxPausedLeavesItToTheNextHarnessToResume) {
  const std::string gate = Gate("gate");
  const std::string script = WriteFile(dir_.Sub("kill.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo kept > note"}}]},
    {"text": "", "wait_for_file": ")" + gate + R"(", "tool_calls": [{"name": "bash", "input": {"command": "cat note"}}]},
    {"text": "Read."}]})");
  auto a = std::make_unique<HarnessProcess>(dir_.Sub("a.json"), Config(script));
  ASSERT_FALSE(a->address.empty());
  auto r = Api("POST", a->url() + "/v1/sessions", kKey, R"({"prompt": "note", "idle_pause_seconds": 1})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  const std::string box = SandboxAfterFirstResult(a->url(), id);
  ASSERT_FALSE(box.empty());
  ASSERT_TRUE(WaitForState(box, v1::SANDBOX_STATE_PAUSED));
  a->proc->Signal(SIGKILL);
  a.reset();
  Open(gate);
  HarnessProcess b(dir_.Sub("b.json"), Config(script));
  ASSERT_FALSE(b.address.empty());
  ASSERT_EQ(WaitForStatus(b.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(b.url(), kKey, id);
  EXPECT_EQ(OfType(events, "sandbox_provisioned").size(), 1u);
  auto resumed = OfType(events, "sandbox_resumed");
  ASSERT_EQ(resumed.size(), 1u) << "the taking-over driver found it paused";
  EXPECT_EQ(resumed[0].at("sandbox_id").as_string(), box);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].at("output").as_string(), "kept\n");
}

// Bad input is a 400 naming the field, and creates nothing.
TEST_F(IdlePauseTest, BadIdlePauseSecondsAreRefusedAndCreateNothing) {
  const std::string script = WriteFile(dir_.Sub("none.json"), R"({"responses": [{"text": "x"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  for (const char* body : {
           R"({"prompt": "p", "idle_pause_seconds": 0})",
           R"({"prompt": "p", "idle_pause_seconds": -5})",
           R"({"prompt": "p", "idle_pause_seconds": 2592001})",
           R"({"prompt": "p", "idle_pause_seconds": "60"})",
           R"({"prompt": "p", "idle_pause_seconds": 1.5})",
           R"({"prompt": "p", "idle_pause_seconds": 60,
               "sandbox": {"attach": {"id": "x", "endpoint": "unix:///tmp/none.sock"}}})"}) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_NE(r.body.find("idle_pause_seconds"), std::string::npos) << r.body;
  }
  auto list = Api("GET", harness.url() + "/v1/sessions", kKey);
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_TRUE(list.json.at("sessions").as_array().empty()) << list.body;
}

}  // namespace
}  // namespace sinew::harness::test
