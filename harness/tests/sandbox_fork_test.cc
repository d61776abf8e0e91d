// Forks with their sandbox (docs/harness.md, "Forks with their sandbox") with real runc
// sandboxes: sinew-store, sinew-sandboxd and sinew-harness as processes, and the scripted
// model (a test double of a language model) replaying the same answers to the source and
// its forks, so that a fork's sandbox shows which point of the source it started from.
#include <gtest/gtest.h>

#include <signal.h>

#include <set>
#include <thread>

#include "sinew/sandbox/provisioner_client.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "fork-key";

// Turn 0 writes a; turn 1 lists the workspace and then writes b; turn 2 ends. A fork after
// turn 0's result replays turn 1 in its own sandbox: its listing shows what that sandbox
// started with (a only: the snapshot after turn 0; nothing: a fresh sandbox).
constexpr const char* kScript = R"({"responses": [
  {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo one > a; echo wrote"}}]},
  {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "ls; echo two > b"}}]},
  {"text": "Done."}]})";

class ForkTest : public StoreAndSandboxdTest {
 protected:
  void StartHarness(const std::string& script_text) {
    const std::string script = WriteFile(dir_.Sub("script.json"), script_text);
    harness_ = std::make_unique<HarnessProcess>(
        dir_.Sub("h" + std::to_string(++harnesses_) + ".json"), R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" + sandboxd_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t"}, "lease_ttl_ms": 2000, "scan_interval_ms": 300,
      "models": {"scripted": {"kind": "scripted", "script": ")" + script + R"("}}})");
    ASSERT_FALSE(harness_->address.empty());
  }
  std::string Url() const { return harness_->url(); }
  // A session of `body` run to its end (or to waiting_for_input); its id.
  std::string RunSession(const std::string& body, const std::string& until = "completed,failed") {
    auto r = Api("POST", Url() + "/v1/sessions", kKey, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    const std::string id(r.json.at("session").at("id").as_string());
    EXPECT_NE(WaitForStatus(Url(), kKey, id, until, 180), "") << id;
    return id;
  }
  // The seq of the `nth` event of `type` in `events` (0 when there is none).
  static uint64_t SeqOf(const std::vector<json::object>& events, const std::string& type, size_t nth = 0) {
    for (const auto& e : events) {
      if (e.at("type").as_string() == type && nth-- == 0) return std::stoull(std::string(e.at("seq").as_string()));
    }
    return 0;
  }
  static std::string Str(const json::object& o, const char* key) {
    const json::value* v = o.if_contains(key);
    return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
  }
  // The outputs of the session's tool results, in order.
  std::vector<std::string> Outputs(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& r : OfType(AllEvents(Url(), kKey, id), "tool_result")) out.push_back(Str(r, "output"));
    return out;
  }
  size_t SessionCount() {
    auto r = Api("GET", Url() + "/v1/sessions?limit=1000", kKey);
    return r.status == 200 ? r.json.at("sessions").as_array().size() : 0;
  }

  std::unique_ptr<HarnessProcess> harness_;
  int harnesses_ = 0;
};

// per_call: a snapshot after each call that may change the sandbox, each naming its call
// and the point of the log it shows. A fork after the first call's result starts its own
// sandbox from the first snapshot: it sees a, not b (written later) and not nothing (a
// fresh sandbox); the source's sandbox is not the fork's.
TEST_F(ForkTest, AForkStartsItsSandboxFromTheSnapshotAtItsPoint) {
  StartHarness(kScript);
  const std::string id = RunSession(R"({"prompt": "go", "snapshots": "per_call"})");
  ASSERT_FALSE(id.empty());
  const auto events = AllEvents(Url(), kKey, id);
  const auto snaps = OfType(events, "sandbox_snapshot");
  const auto calls = OfType(events, "tool_call");
  ASSERT_EQ(snaps.size(), 2u) << "one per bash call";
  ASSERT_EQ(calls.size(), 2u);
  const std::string source_box = Str(OfType(events, "sandbox_provisioned").at(0), "sandbox_id");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(Str(snaps[i], "reason"), "per_call");
    EXPECT_EQ(Str(snaps[i], "call_id"), Str(calls[i], "call_id"));
    EXPECT_EQ(Str(snaps[i], "sandbox_id"), source_box);
    // It shows the log up to the call's result.
    EXPECT_EQ(std::stoull(Str(snaps[i], "at_seq")), SeqOf(events, "tool_result", i)) << json::serialize(snaps[i]);
  }
  EXPECT_EQ(Outputs(id), (std::vector<std::string>{"wrote\n", "a\n"}));

  const uint64_t at = SeqOf(events, "tool_result", 0);
  auto f = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey, R"({"at_seq": )" + std::to_string(at) + "}");
  ASSERT_EQ(f.status, 201) << f.body;
  const json::object& sandbox = f.json.at("sandbox").as_object();
  EXPECT_EQ(Str(sandbox, "source_sandbox_id"), source_box);
  EXPECT_EQ(Str(sandbox, "from_snapshot"), Str(snaps[0], "snapshot_id"));
  EXPECT_EQ(sandbox.at("calls_after_snapshot").to_number<int64_t>(), 0);
  ASSERT_EQ(f.json.at("sessions").as_array().size(), 1u);
  const std::string fork(f.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(Url(), kKey, fork, "completed,failed", 180), "completed");
  const auto fork_events = AllEvents(Url(), kKey, fork);
  const auto released = OfType(fork_events, "sandbox_released");
  ASSERT_FALSE(released.empty());
  EXPECT_EQ(Str(released[0], "sandbox_id"), source_box);
  EXPECT_EQ(Str(released[0], "next_from_snapshot"), Str(snaps[0], "snapshot_id"));
  const auto boxes = OfType(fork_events, "sandbox_provisioned");
  ASSERT_EQ(boxes.size(), 2u) << "the source's (copied) and the fork's own";
  EXPECT_EQ(Str(boxes[1], "from_snapshot"), Str(snaps[0], "snapshot_id"));
  EXPECT_NE(Str(boxes[1], "sandbox_id"), source_box);
  // The first output is the source's (copied); the second is the fork's own run of turn 1.
  EXPECT_EQ(Outputs(fork), (std::vector<std::string>{"wrote\n", "a\n"}));
  // The fork keeps its own snapshots (of its own sandbox), never the source's.
  const auto fork_snaps = OfType(fork_events, "sandbox_snapshot");
  ASSERT_EQ(fork_snaps.size(), 1u);
  EXPECT_EQ(Str(fork_snaps[0], "sandbox_id"), Str(boxes[1], "sandbox_id"));
}

// Best-of-n: one request, n sessions from the same point, each with its own sandbox from
// the same snapshot.
TEST_F(ForkTest, BestOfNForksEachGetTheirOwnSandboxFromOneSnapshot) {
  StartHarness(kScript);
  const std::string id = RunSession(R"({"prompt": "go", "snapshots": "per_call"})");
  ASSERT_FALSE(id.empty());
  const auto events = AllEvents(Url(), kKey, id);
  const std::string first_snapshot = Str(OfType(events, "sandbox_snapshot").at(0), "snapshot_id");
  const uint64_t at = SeqOf(events, "tool_result", 0);
  auto f = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey,
               R"({"at_seq": )" + std::to_string(at) + R"(, "n": 3})");
  ASSERT_EQ(f.status, 201) << f.body;
  const auto& forks = f.json.at("sessions").as_array();
  ASSERT_EQ(forks.size(), 3u);
  std::set<std::string> ids, sandboxes;
  for (const auto& s : forks) {
    const std::string fork(s.at("id").as_string());
    ids.insert(fork);
    EXPECT_EQ(s.at("forked_from_session").as_string(), id);
    ASSERT_EQ(WaitForStatus(Url(), kKey, fork, "completed,failed", 180), "completed") << fork;
    const auto boxes = OfType(AllEvents(Url(), kKey, fork), "sandbox_provisioned");
    ASSERT_EQ(boxes.size(), 2u) << fork;
    EXPECT_EQ(Str(boxes[1], "from_snapshot"), first_snapshot) << fork;
    sandboxes.insert(Str(boxes[1], "sandbox_id"));
    EXPECT_EQ(Outputs(fork).at(1), "a\n") << fork;
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(sandboxes.size(), 3u) << "each fork has a sandbox of its own";
}

// Without snapshots a fork still leaves the source's sandbox to the source: its first
// sandbox call gets a fresh one (the answer says there was no snapshot).
TEST_F(ForkTest, WithoutSnapshotsAForkGetsAFreshSandboxNotTheSources) {
  StartHarness(kScript);
  const std::string id = RunSession(R"({"prompt": "go"})");
  ASSERT_FALSE(id.empty());
  const auto events = AllEvents(Url(), kKey, id);
  EXPECT_TRUE(OfType(events, "sandbox_snapshot").empty());
  const std::string source_box = Str(OfType(events, "sandbox_provisioned").at(0), "sandbox_id");
  const uint64_t at = SeqOf(events, "tool_result", 0);
  auto f = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey, R"({"at_seq": )" + std::to_string(at) + "}");
  ASSERT_EQ(f.status, 201) << f.body;
  EXPECT_TRUE(f.json.at("sandbox").at("from_snapshot").is_null()) << f.body;
  const std::string fork(f.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(Url(), kKey, fork, "completed,failed", 180), "completed");
  const auto boxes = OfType(AllEvents(Url(), kKey, fork), "sandbox_provisioned");
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_NE(Str(boxes[1], "sandbox_id"), source_box);
  EXPECT_EQ(Str(boxes[1], "from_snapshot"), "");
  EXPECT_EQ(Outputs(fork).at(1), "(no output)") << "a fresh sandbox: nothing to list";
}

// on_pause: a conversation that waits for input has its changed sandbox snapshotted, then
// paused. A fork of that point, given a message, runs its next call in a sandbox restored
// from that snapshot.
TEST_F(ForkTest, OnPauseKeepsTheSandboxAsItWasWhenTheConversationWaited) {
  StartHarness(R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo one > a; echo wrote"}}]},
    {"text": "Wrote a."},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "cat a"}}]},
    {"text": "Read a."}]})");
  const std::string id =
      RunSession(R"({"prompt": "go", "keep_open": true, "snapshots": "on_pause"})", "waiting_for_input,failed");
  ASSERT_FALSE(id.empty());
  const auto events = AllEvents(Url(), kKey, id);
  const auto snaps = OfType(events, "sandbox_snapshot");
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(Str(snaps[0], "reason"), "on_pause");
  EXPECT_LT(SeqOf(events, "sandbox_snapshot"), SeqOf(events, "sandbox_paused")) << "snapshotted, then paused";
  const uint64_t at = SeqOf(events, "sandbox_paused");
  auto f = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey,
               R"({"at_seq": )" + std::to_string(at) + R"(, "message": "read it back"})");
  ASSERT_EQ(f.status, 201) << f.body;
  EXPECT_EQ(f.json.at("sandbox").at("from_snapshot").as_string(), Str(snaps[0], "snapshot_id"));
  const std::string fork(f.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(Url(), kKey, fork, "waiting_for_input,completed,failed", 180), "waiting_for_input");
  EXPECT_EQ(Outputs(fork), (std::vector<std::string>{"wrote\n", "one\n"}));
}

// A harness SIGKILLed after a call's result was logged and before its per_call snapshot
// was: sinew-sandboxd is stopped (SIGSTOP) while the call runs, so the snapshot cannot be
// taken, and the log holds the result without it when the harness dies. The harness that
// takes the session over snapshots the sandbox before its first model call, and a fork
// at that result starts from that snapshot.
TEST_F(ForkTest, AHarnessKilledBetweenACallsResultAndItsSnapshotLeavesItToTheNext) {
  const std::string script = R"({"responses": [
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "echo one > a; echo wrote"}}]},
    {"text": "", "tool_calls": [{"name": "bash", "input": {"command": "sleep 2; echo two > b; echo slept"}}]},
    {"text": "Done."}]})";
  StartHarness(script);
  auto r = Api("POST", Url() + "/v1/sessions", kKey, R"({"prompt": "go", "snapshots": "per_call"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  auto count = [&](const std::string& type) { return OfType(AllEvents(Url(), kKey, id), type).size(); };
  for (int i = 0; i < 3600 && count("tool_call") < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(count("tool_call"), 2u);
  ASSERT_EQ(count("sandbox_snapshot"), 1u) << "the first call's";
  sandboxd_->proc().Signal(SIGSTOP);
  for (int i = 0; i < 3600 && count("tool_result") < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(count("tool_result"), 2u) << "the call's result comes from its sandbox, not from sinew-sandboxd";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(count("sandbox_snapshot"), 1u) << "no snapshot can be taken while sinew-sandboxd is stopped";
  harness_->proc->Signal(SIGKILL);
  harness_.reset();
  sandboxd_->proc().Signal(SIGCONT);

  StartHarness(script);
  ASSERT_EQ(WaitForStatus(Url(), kKey, id, "completed,failed", 180), "completed");
  const auto events = AllEvents(Url(), kKey, id);
  const auto snaps = OfType(events, "sandbox_snapshot");
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(Str(snaps[1], "reason"), "per_call");
  EXPECT_EQ(Str(snaps[1], "call_id"), "") << "taken by the next driver, not after its call";
  const uint64_t result = SeqOf(events, "tool_result", 1);
  EXPECT_GE(std::stoull(Str(snaps[1], "at_seq")), result);
  EXPECT_LT(SeqOf(events, "sandbox_snapshot", 1), SeqOf(events, "model_request", 2)) << "before its model call";
  auto f = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey,
               R"({"at_seq": )" + Str(snaps[1], "at_seq") + R"(, "message": "again"})");
  ASSERT_EQ(f.status, 201) << f.body;
  EXPECT_EQ(f.json.at("sandbox").at("from_snapshot").as_string(), Str(snaps[1], "snapshot_id"));
  EXPECT_EQ(f.json.at("sandbox").at("calls_after_snapshot").to_number<int64_t>(), 0);
}

// Bad requests: a clear 400 and no session made; a bad snapshots policy refuses the task.
TEST_F(ForkTest, BadForkAndSnapshotRequestsAreRefusedAndMakeNothing) {
  StartHarness(kScript);
  const std::string id = RunSession(R"({"prompt": "go", "snapshots": "per_call"})");
  ASSERT_FALSE(id.empty());
  const size_t before = SessionCount();
  for (const char* body : {R"({"at_seq": 2, "n": 0})", R"({"at_seq": 2, "n": 17})", R"({"at_seq": 2, "n": "3"})",
                           R"({"at_seq": 2, "n": -1})", R"({"at_seq": 2, "n": 2.5})", R"({"n": 2})",
                           R"({"at_seq": 2, "snapshot": "x"})"}) {
    auto r = Api("POST", Url() + "/v1/sessions/" + id + "/fork", kKey, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_EQ(r.json.at("error").at("code").as_string(), "invalid_argument") << body;
  }
  for (const char* body : {R"({"prompt": "x", "snapshots": "sometimes"})", R"({"prompt": "x", "snapshots": 1})",
                           R"({"prompt": "x", "snapshots": "per_call", "sandbox": {"attach": {"id": "s", "endpoint": "unix:///x"}}})"}) {
    auto r = Api("POST", Url() + "/v1/sessions", kKey, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_NE(r.body.find("snapshots"), std::string::npos) << body << ": " << r.body;
  }
  EXPECT_EQ(SessionCount(), before);
}

}  // namespace
}  // namespace sinew::harness::test
