// End to end with real runc sandboxes: sinew-store, sinew-sandboxd and sinew-harness as
// processes, the scripted model (a test double of a language model) driving a
// multi-step task; a sandbox that dies mid-session; and a program inside a sandbox
// that searches its whole environment and file system for the harness's secrets.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <sstream>

#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sinew/session_store/session_store.h"
#include "test_util.h"
#include "tool_catalog.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "sandbox-key";

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    sandboxd_ = std::make_unique<SandboxdProcess>(std::vector<std::string>{"--log-format", "json"});
    ASSERT_FALSE(sandboxd_->address.empty()) << "sinew-sandboxd did not start (root, runc and the image needed)";
  }
  std::string Config(const std::string& script, const std::string& extra = "") const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" + sandboxd_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t"},
      "models": {"scripted": {"kind": "scripted", "script": ")" + script + R"("}})" + extra + "}";
  }
  static std::vector<std::string> Types(const std::vector<json::object>& events) {
    std::vector<std::string> t;
    for (const auto& e : events) t.emplace_back(e.at("type").as_string());
    return t;
  }
  static std::vector<json::object> Of(const std::vector<json::object>& events, const char* type) {
    std::vector<json::object> out;
    for (const auto& e : events) {
      if (e.contains(type)) out.push_back(e.at(type).as_object());
    }
    return out;
  }
  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<SandboxdProcess> sandboxd_;
};

// docs/logging.md: sandboxd logs the provision of a session's sandbox with the session's
// trace (the harness sends traceparent metadata), the session id as its label.
TEST_F(SandboxTest, ProvisionIsLoggedWithTheSessionsTrace) {
  const std::string script = WriteFile(dir_.Sub("task.json"), R"({"responses": [
    {"text": "Looking.", "tool_calls": [{"name": "bash", "input": {"command": "echo hi"}}]}, {"text": "done"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "say hi"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  int started = 0, ended = 0, destroyed = 0;
  while (auto line = sandboxd_->proc().ReadLine(std::chrono::milliseconds(1000))) {
    boost::system::error_code ec;
    json::value v = json::parse(*line, ec);
    if (ec || !v.is_object()) continue;  // the startup line
    const auto& o = v.as_object();
    const std::string msg(o.at("msg").as_string());
    if (!o.contains("trace_id") || o.at("trace_id").as_string() != id) continue;
    EXPECT_EQ(o.at("component").as_string(), "sinew-sandboxd");
    EXPECT_TRUE(o.contains("parent_span_id")) << *line;
    started += msg == "sandboxd Provision started" ? 1 : 0;
    ended += msg == "sandboxd Provision ended: OK" ? 1 : 0;
    destroyed += msg == "sandboxd Destroy ended: OK" ? 1 : 0;
    if (msg == "sandboxd Provision started") {
      EXPECT_EQ(o.at("label").as_string(), id) << *line;
    }
  }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(ended, 1);
  EXPECT_EQ(destroyed, 1) << "the sandbox is destroyed when the session ends, in the same trace";
}

TEST_F(SandboxTest, AMultiStepTaskWritesFilesRunsCommandsReadsResultsAndFinishes) {
  const std::string script = WriteFile(dir_.Sub("task.json"), R"({"responses": [
    {"text": "Writing the program.", "tool_calls": [{"name": "write_file", "input": {"path": "sum.py",
      "content": "import sys\nprint(sum(int(x) for x in sys.argv[1:]))\n"}}]},
    {"text": "Running it.", "tool_calls": [{"name": "bash", "input": {"command": "python3 sum.py 19 23 > out.txt && echo ran"}}]},
    {"text": "Reading the result.", "tool_calls": [{"name": "read_file", "input": {"path": "out.txt"}},
                                                  {"name": "list_files", "input": {"pattern": "*.py"}}]},
    {"text": "The sum is 42."}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "add 19 and 23 with a program"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  auto types = Types(events);
  // Lazy hands: the sandbox comes after the first model call, at the first tool call.
  auto first_response = std::find(types.begin(), types.end(), "model_response");
  auto provisioned = std::find(types.begin(), types.end(), "sandbox_provisioned");
  ASSERT_NE(provisioned, types.end());
  EXPECT_LT(first_response, provisioned);
  EXPECT_EQ(std::count(types.begin(), types.end(), "sandbox_provisioned"), 1);
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 4u);
  for (const auto& res : results) EXPECT_FALSE(res.contains("is_error")) << json::serialize(res);
  EXPECT_NE(std::string(results[1].at("output").as_string()).find("ran"), std::string::npos);
  EXPECT_NE(std::string(results[2].at("output").as_string()).find("42"), std::string::npos);
  EXPECT_NE(std::string(results[3].at("output").as_string()).find("sum.py"), std::string::npos);
  auto calls = Of(events, "tool_call");
  EXPECT_FALSE(calls[0].at("sandbox_id").as_string().empty());
  EXPECT_TRUE(calls[0].at("idempotent").as_bool());   // write_file
  EXPECT_FALSE(calls[1].contains("idempotent"));      // bash: false, omitted in JSON
  // The session's end released the sandbox.
  EXPECT_EQ(types[types.size() - 2], "sandbox_released");
  auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
  ASSERT_TRUE(prov.ok());
  auto running = (*prov)->List(false);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->empty());
}

// A sandbox call holds no harness thread while its tool runs (issue 17): with one worker
// thread (`workers`: the pool for blocking calls), three sessions' 20-second commands still
// run at the same time. When a call held its thread they ran one after another.
TEST_F(SandboxTest, SandboxCallsHoldNoThreadWhileTheToolRuns) {
  const std::string script = WriteFile(dir_.Sub("task.json"), R"({"responses": [
    {"text": "Waiting.", "tool_calls": [{"name": "bash", "input": {"command": "date +%s.%N; sleep 20; date +%s.%N"}}]},
    {"text": "done"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script, R"(, "workers": 1)"));
  ASSERT_FALSE(harness.address.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "wait"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  std::vector<std::pair<double, double>> ran;  // each command's start and end (wall clock)
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 300), "completed");
    auto results = Of(AllEvents(harness.url(), kKey, id), "tool_result");
    ASSERT_EQ(results.size(), 1u);
    std::istringstream out(std::string(results[0].at("output").as_string()));
    double start = 0, end = 0;
    ASSERT_TRUE(out >> start >> end) << results[0].at("output").as_string();
    ran.emplace_back(start, end);
  }
  std::sort(ran.begin(), ran.end());
  int overlapping = 0;
  for (size_t i = 1; i < ran.size(); ++i) overlapping += ran[i].first < ran[i - 1].second ? 1 : 0;
  for (const auto& [start, end] : ran) std::printf("command ran %.1f .. %.1f\n", start - ran[0].first, end - ran[0].first);
  EXPECT_GE(overlapping, 1) << "the commands ran one after another: each call held the one worker thread";
}

// A sandbox provision holds no harness thread while sandboxd starts the sandbox (issue
// 17): with one worker thread, a sandboxd with no warm pool (the tests' has none) that
// starts one sandbox at a time (its start line) has several sessions' Provision calls in
// hand at once. When a provision held the one worker, sandboxd saw one call at a time.
TEST_F(SandboxTest, ProvisionsHoldNoThreadWhileSandboxdStartsTheSandbox) {
  sandboxd_.reset();
  sandboxd_ = std::make_unique<SandboxdProcess>(std::vector<std::string>{
      "--log-format", "json", "--max-concurrent-starts", "1"});
  ASSERT_FALSE(sandboxd_->address.empty());
  const std::string script = WriteFile(dir_.Sub("task.json"), R"({"responses": [
    {"text": "Looking.", "tool_calls": [{"name": "bash", "input": {"command": "echo hi"}}]}, {"text": "done"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script, R"(, "workers": 1)"));
  ASSERT_FALSE(harness.address.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "say hi"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  for (const auto& id : ids) ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 300), "completed");
  // sandboxd's log, in order: how many Provision calls it held at once.
  int in_hand = 0, most = 0, started = 0;
  while (auto line = sandboxd_->proc().ReadLine(std::chrono::milliseconds(1000))) {
    boost::system::error_code ec;
    json::value v = json::parse(*line, ec);
    if (ec || !v.is_object()) continue;
    const std::string msg(v.as_object().at("msg").as_string());
    if (msg == "sandboxd Provision started") {
      ++started;
      most = std::max(most, ++in_hand);
    } else if (msg.rfind("sandboxd Provision ended", 0) == 0) {
      --in_hand;
    }
  }
  std::printf("sandboxd held at most %d of %d Provision calls at once\n", most, started);
  EXPECT_EQ(started, 3);
  EXPECT_GE(most, 2) << "sandboxd saw one provision at a time: each held the harness's one worker thread";
}

TEST_F(SandboxTest, ADeadSandboxIsAToolErrorAndTheNextCallGetsAFreshOne) {
  const std::string script = WriteFile(dir_.Sub("dies.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo hi > f && cat f"}}]},
    {"text": "", "delay_ms": 6000, "tool_calls": [{"name": "bash", "input": {"command": "cat f"}}]},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "ls f; echo fresh"}}]},
    {"text": "done"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "survive"})");
  ASSERT_EQ(r.status, 201);
  const std::string id(r.json.at("session").at("id").as_string());
  // While the model "thinks" about turn 1 (6 s), the sandbox dies under the session.
  // Wait for the first call's result, not just the sandbox: killing it before call 1 ran
  // would test a different story (call 1 lost, call 2 fresh).
  std::string box;
  for (int i = 0; i < 600 && box.empty(); ++i) {
    auto events = AllEvents(harness.url(), kKey, id);
    if (!Of(events, "tool_result").empty()) {
      for (const auto& p : Of(events, "sandbox_provisioned")) {
        box = std::string(p.at("sandbox_id").as_string());
      }
    }
    if (box.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(box.empty());
  auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
  ASSERT_TRUE(prov.ok());
  ASSERT_TRUE((*prov)->Destroy(box).ok());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  auto lost = Of(events, "sandbox_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].at("sandbox_id").as_string(), box);
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[1].at("is_error").as_bool());
  EXPECT_NE(std::string(results[1].at("output").as_string()).find("the sandbox was lost"), std::string::npos)
      << json::serialize(results[1]);
  // A fresh sandbox, without the old files.
  auto boxes = Of(events, "sandbox_provisioned");
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_NE(boxes[1].at("sandbox_id").as_string(), box);
  EXPECT_NE(std::string(results[2].at("output").as_string()).find("No such file"), std::string::npos);
  EXPECT_NE(std::string(results[2].at("output").as_string()).find("fresh"), std::string::npos);
}

// A conversation that stays open pauses its sandbox while it waits for input (sandboxd's
// Pause: the container stopped, its files kept), and the next turn's first sandbox call
// resumes it: the same sandbox, with the file the first turn wrote. The close destroys it.
TEST_F(SandboxTest, AConversationWaitingForInputPausesItsSandboxAndTheNextTurnResumesIt) {
  const std::string script = WriteFile(dir_.Sub("open.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo kept > note"}}]},
    {"text": "Written."},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "cat note"}}]},
    {"text": "Read."}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "note", "keep_open": true})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "waiting_for_input", 120), "waiting_for_input");
  auto events = AllEvents(harness.url(), kKey, id);
  auto boxes = Of(events, "sandbox_provisioned");
  ASSERT_EQ(boxes.size(), 1u);
  const std::string box(boxes[0].at("sandbox_id").as_string());
  EXPECT_TRUE(Of(events, "sandbox_released").empty());
  auto changes = Of(events, "status_change");
  EXPECT_NE(std::string(changes.back().at("reason").as_string()).find("its sandbox " + box + " is paused"),
            std::string::npos)
      << json::serialize(changes.back());
  auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
  ASSERT_TRUE(prov.ok());
  auto info = (*prov)->Get(box);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state(), v1::SANDBOX_STATE_PAUSED);

  auto sent = Api("POST", harness.url() + "/v1/sessions/" + id + "/messages", kKey, R"({"text": "read it"})");
  ASSERT_EQ(sent.status, 202) << sent.body;
  // The second turn's answer, then waiting again.
  for (int i = 0; i < 1200 && Of(events, "model_response").size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    events = AllEvents(harness.url(), kKey, id);
  }
  ASSERT_EQ(Of(events, "model_response").size(), 4u);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "waiting_for_input,completed,failed", 120), "waiting_for_input");
  events = AllEvents(harness.url(), kKey, id);
  EXPECT_EQ(Of(events, "sandbox_provisioned").size(), 1u) << "the second turn got a fresh sandbox";
  EXPECT_TRUE(Of(events, "sandbox_lost").empty());
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(std::string(results[1].at("output").as_string()).find("kept"), std::string::npos)
      << json::serialize(results[1]);
  auto calls = Of(events, "tool_call");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].at("sandbox_id").as_string(), box);

  ASSERT_EQ(Api("POST", harness.url() + "/v1/sessions/" + id + "/close", kKey).status, 202);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed", 60), "completed");
  events = AllEvents(harness.url(), kKey, id);
  ASSERT_EQ(Of(events, "sandbox_released").size(), 1u);
  auto running = (*prov)->List(false);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->empty()) << running->size() << " sandboxes left";
}

// The tenant's sandbox quota (docs/security.md): with max_sandboxes 1, a second session's
// sandbox tool call fails as a tool error and the session goes on; when the first session
// ends, the next one gets a sandbox.
TEST_F(SandboxTest, OverMaxSandboxesTheToolCallFailsAndTheSessionGoesOn) {
  const std::string holder = WriteFile(dir_.Sub("holder.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo held"}}]},
    {"text": "thinking", "delay_ms": 120000}]})");
  const std::string second = WriteFile(dir_.Sub("second.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo second"}}]},
    {"text": "done"}]})");
  std::string config = Config(holder, R"(, "tenants": {"t": {"max_sandboxes": 1}})");
  config.replace(config.find(R"("models": {)"), 11,
                 R"("models": {"second": {"kind": "scripted", "script": ")" + second + R"("}, )");
  HarnessProcess harness(dir_.Sub("h.json"), config);
  ASSERT_FALSE(harness.address.empty()) << config;
  auto submit = [&](const std::string& model) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "go", "model": ")" + model + R"("})");
    EXPECT_EQ(r.status, 201) << r.body;
    return std::string(r.json.at("session").at("id").as_string());
  };
  const std::string first = submit("scripted");
  bool holding = false;
  for (int i = 0; i < 1200 && !holding; ++i) {
    holding = !Of(AllEvents(harness.url(), kKey, first), "tool_result").empty();
    if (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(holding) << "the first session never ran its call";
  const std::string refused = submit("second");
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, refused, "completed,failed", 120), "completed");
  auto events = AllEvents(harness.url(), kKey, refused);
  EXPECT_TRUE(Of(events, "sandbox_provisioned").empty());
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].at("is_error").as_bool());
  EXPECT_NE(std::string(results[0].at("output").as_string()).find("max_sandboxes 1"), std::string::npos)
      << json::serialize(results[0]);
  // The first session ends: its sandbox no longer counts.
  ASSERT_EQ(Api("POST", harness.url() + "/v1/sessions/" + first + "/cancel", kKey).status, 202);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, first, "cancelled"), "cancelled");
  const std::string admitted = submit("second");
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, admitted, "completed,failed", 120), "completed");
  events = AllEvents(harness.url(), kKey, admitted);
  EXPECT_EQ(Of(events, "sandbox_provisioned").size(), 1u);
  results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].contains("is_error")) << json::serialize(results[0]);  // false is left out
}

// Exactly-once tool calls across a harness crash: the harness dies while a long,
// non-idempotent command runs; the sandbox finishes it anyway, and the harness that takes
// the session over asks the sandbox for that call and records its real result: no
// "interrupted", no second run.
TEST_F(SandboxTest, AHarnessKilledDuringALongCommandIsFollowedByOneThatGetsItsRealResult) {
  const std::string script = WriteFile(dir_.Sub("long.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo a >> log; sleep 3; echo b >> log; cat log"}}]},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "cat log"}}]},
    {"text": "done"}]})");
  const std::string config = Config(script, R"(, "lease_ttl_ms": 600, "scan_interval_ms": 200)");
  std::string id;
  {
    HarnessProcess first(dir_.Sub("h1.json"), config);
    ASSERT_FALSE(first.address.empty());
    auto r = Api("POST", first.url() + "/v1/sessions", kKey, R"({"prompt": "append twice"})");
    ASSERT_EQ(r.status, 201) << r.body;
    id = std::string(r.json.at("session").at("id").as_string());
    bool running = false;
    for (int i = 0; i < 600 && !running; ++i) {
      running = !Of(AllEvents(first.url(), kKey, id), "tool_call").empty();
      if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(running);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // "a" is written, "b" is not
    first.proc->Signal(SIGKILL);
    first.proc->Wait();
  }
  HarnessProcess second(dir_.Sub("h2.json"), config);
  ASSERT_FALSE(second.address.empty());
  ASSERT_EQ(WaitForStatus(second.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(second.url(), kKey, id);
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[0].contains("interrupted")) << json::serialize(results[0]);
  EXPECT_FALSE(results[0].contains("is_error")) << json::serialize(results[0]);
  EXPECT_EQ(results[0].at("output").as_string(), "a\nb\n");
  EXPECT_EQ(results[1].at("output").as_string(), "a\nb\n");  // it ran exactly once
  EXPECT_EQ(Of(events, "tool_call").size(), 2u);
  EXPECT_EQ(Of(events, "sandbox_provisioned").size(), 1u);
  EXPECT_TRUE(Of(events, "sandbox_lost").empty());
}

// A harness that loses the lease of a session while its driver waits on a long sandbox
// command (the harness was frozen past the ttl: the renewal is refused) drives the
// session anew at once, from a new driver that holds the lease again: it does not wait
// for the old driver, which no longer may write and which a sandbox call does not cut
// short. The resume is written while the command still runs (the command prints the
// time it ends; both clocks are this machine's).
TEST_F(SandboxTest, ASessionWhoseDriverLostTheLeaseInALongCommandIsDrivenAnewAtOnce) {
  const std::string script = WriteFile(dir_.Sub("long.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "sleep 20; date +%s%3N"}}]},
    {"text": "done"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script, R"(, "lease_ttl_ms": 600, "scan_interval_ms": 200)"));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "wait"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  bool running = false;
  for (int i = 0; i < 1500 && !running; ++i) {
    running = !Of(AllEvents(harness.url(), kKey, id), "tool_call").empty();
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(running);
  // Frozen for longer than the lease's ttl, and meanwhile another owner takes the expired
  // lease (briefly): the harness has lost it when it wakes up.
  harness.proc->Signal(SIGSTOP);
  auto store = store::ConnectSessionStore(store_->address);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<v1::Lease> taken = Status::Unavailable("not tried");
  for (int i = 0; i < 300 && !taken.ok(); ++i) {
    taken = (*store)->AcquireLease(id, {"test-intruder", ""}, std::chrono::milliseconds(100));
    if (!taken.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(taken.ok()) << "the frozen harness's lease never expired: " << taken.status().ToString();
  harness.proc->Signal(SIGCONT);
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  int64_t resumed_at = 0;
  for (const auto& e : events) {
    if (e.contains("annotation") && e.at("annotation").at("labels").at("kind").as_string() == "resume" &&
        resumed_at == 0) {
      resumed_at = std::stoll(std::string(e.at("timestamp_unix_ms").as_string()));
    }
  }
  ASSERT_NE(resumed_at, 0) << "the session was not resumed";
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  const int64_t command_ended_at = std::stoll(std::string(results[0].at("output").as_string()));
  EXPECT_LT(resumed_at, command_ended_at) << "the session was driven again only after the command had ended";
  EXPECT_EQ(Of(events, "tool_call").size(), 1u);  // the command ran once
}

TEST_F(SandboxTest, NoSecretIsAnywhereASandboxedProgramCanLook) {
  const std::string inline_secret = "sk-inline-4b1d9e0c7a";
  const std::string env_secret = "sk-env-93fa22c1d0b8";
  // The scanner gets the secrets reversed, so that the script itself does not plant them.
  std::string rev1(inline_secret.rbegin(), inline_secret.rend());
  std::string rev2(env_secret.rbegin(), env_secret.rend());
  const std::string scanner =
      "import os\n"
      "needles = [s[::-1].encode() for s in ['" + rev1 + "', '" + rev2 + "']]\n"
      "found, files, procs = [], 0, 0\n"
      "for k, v in os.environ.items():\n"
      "    if any(n in (k + '=' + v).encode() for n in needles): found.append('env:' + k)\n"
      "for root, dirs, names in os.walk('/'):\n"
      "    if root == '/': dirs[:] = [d for d in dirs if d != 'sys']\n"
      "    if root == '/proc':\n"
      "        dirs[:] = [d for d in dirs if d.isdigit()]\n"
      "        names = []\n"
      "    elif root.startswith('/proc/'):\n"
      "        procs += 1\n"
      "        dirs[:] = []\n"
      "        names = [n for n in names if n in ('environ', 'cmdline')]\n"
      "    for n in names:\n"
      "        p = os.path.join(root, n)\n"
      "        try:\n"
      "            if os.path.islink(p) or not os.path.isfile(p): continue\n"
      "            with open(p, 'rb') as f: data = f.read(8 << 20)\n"
      "        except OSError: continue\n"
      "        files += 1\n"
      "        if any(n2 in data for n2 in needles): found.append(p)\n"
      "print('FOUND ' + ' '.join(found) if found else 'CLEAN files=%d procs=%d' % (files, procs))\n";
  json::object write_input{{"path", "scan.py"}, {"content", scanner}};
  const std::string script = WriteFile(dir_.Sub("scan.json"), R"({"responses": [
    {"text": "", "tool_calls": [{"name": "write_file", "input": )" + json::serialize(write_input) + R"(}]},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "python3 scan.py", "timeout": 600}}]},
    {"text": "scanned"}]})");
  const std::string extra = R"(, "secrets": {"inline": {"value": ")" + inline_secret + R"("},
      "fromenv": {"env": "SINEW_TEST_HARNESS_SECRET"}},
    "http_request": {"allow": [{"host": "127.0.0.1:9", "secret": "inline"}, {"host": "127.0.0.2:9", "secret": "fromenv"}]})";
  HarnessProcess harness(dir_.Sub("h.json"), Config(script, extra), {"SINEW_TEST_HARNESS_SECRET=" + env_secret});
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "look for secrets"})");
  ASSERT_EQ(r.status, 201);
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 600), "completed");
  auto results = Of(AllEvents(harness.url(), kKey, id), "tool_result");
  ASSERT_EQ(results.size(), 2u);
  const std::string out(results[1].at("output").as_string());
  EXPECT_EQ(out.rfind("CLEAN files=", 0), 0u) << out;
  // It really looked: thousands of files of the image and the processes it can see.
  const long files = std::atol(out.c_str() + out.find('=') + 1);
  EXPECT_GT(files, 1000) << out;
}

}  // namespace
}  // namespace sinew::harness::test

namespace sinew::harness::test {
namespace {

// The built-in oracle in a real runc sandbox: its command is one ordinary bash call
// (tool_call before, tool_result after, exit status and output kept); a command past the
// session's max_wall_seconds is cut by the bash timeout and its result says timed_out.
TEST_F(SandboxTest, TheBuiltinOracleRunsItsPromptAsOneBashCallAndEnds) {
  const std::string script = WriteFile(dir_.Sub("unused.json"), R"({"responses": [{"text": "x"}]})");
  HarnessProcess harness(dir_.Sub("h.json"), Config(script));
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey,
               R"({"prompt": "echo from-oracle > o.txt && cat o.txt && exit 3", "model": "oracle"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 180), "completed");
  auto events = AllEvents(harness.url(), kKey, id);
  auto calls = Of(events, "tool_call");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].at("tool_name").as_string(), "bash");
  EXPECT_EQ(json::parse(calls[0].at("input_json").as_string()).at("command").as_string(),
            "echo from-oracle > o.txt && cat o.txt && exit 3");
  auto results = Of(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(std::string(results[0].at("output").as_string()).find("from-oracle"), std::string::npos);
  EXPECT_EQ(results[0].at("exit_status").as_int64(), 3);
  EXPECT_FALSE(results[0].contains("timed_out"));  // false, omitted in JSON

  auto slow = Api("POST", harness.url() + "/v1/sessions", kKey,
                  R"({"prompt": "sleep 30", "model": "oracle", "limits": {"max_wall_seconds": 2}})");
  ASSERT_EQ(slow.status, 201) << slow.body;
  const std::string slow_id(slow.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, slow_id, "completed,failed", 180), "failed");
  auto slow_events = AllEvents(harness.url(), kKey, slow_id);
  auto slow_results = Of(slow_events, "tool_result");
  ASSERT_EQ(slow_results.size(), 1u);
  EXPECT_TRUE(slow_results[0].at("timed_out").as_bool()) << json::serialize(slow_results[0]);
  auto errors = Of(slow_events, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].at("code").as_string(), "limit_exceeded");
  EXPECT_EQ(errors[0].at("limit").as_string(), "max_wall_seconds");  // as data
}

}  // namespace
}  // namespace sinew::harness::test
