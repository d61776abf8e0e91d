// Sub-agents (docs/harness.md, "Sub-agents") against real sinew-store and sinew-harness
// processes, with scripted models: a delegate call starts one child session whose answer
// is the call's result; the child's tokens count against the parent's budget; a cancel
// reaches the children and theirs; an interrupt stops the child and the parent goes on;
// bad delegate configs are 400s that create nothing, bad calls error results that create
// no child; depth and child counts are bounded; and harnesses SIGKILLed while parents
// delegate leave exactly one child and one result per call.
#include <csignal>

#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

class SubagentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    const std::string gate = dir_.Sub("never");  // never created: a model that waits forever
    // The parent: one delegate call to the worker, then an answer.
    Script("boss", R"({"responses": [
      {"text": "Delegating.", "tool_calls": [{"name": "delegate", "input": {"task": "find the answer", "model": "worker"}}]},
      {"text": "Boss done."}]})");
    Script("worker", R"({"responses": [{"text": "one two three four five six seven eight nine ten"}]})");
    // A child that waits on its model until cancelled.
    Script("stuck", R"({"responses": [{"text": "never", "wait_for_file": ")" + gate + R"("}]})");
    Script("boss_stuck", R"({"responses": [
      {"text": "Delegating.", "tool_calls": [{"name": "delegate", "input": {"task": "wait", "model": "stuck"}}]},
      {"text": "Boss goes on."}]})");
    // A child that delegates in turn (to the stuck model).
    Script("mid", R"({"responses": [
      {"text": "Mid delegating.", "tool_calls": [{"name": "delegate", "input": {"task": "deeper", "model": "stuck"}}]},
      {"text": "Mid done."}]})");
    Script("boss_mid", R"({"responses": [
      {"text": "Delegating.", "tool_calls": [{"name": "delegate", "input": {"task": "plan", "model": "mid"}}]},
      {"text": "Boss done."}]})");
    // Calls that must be refused: no task, an unknown model, an unknown sandbox choice, a
    // tool the parent may not use.
    Script("bad", R"({"responses": [
      {"text": "Bad calls.", "tool_calls": [
        {"name": "delegate", "input": {"model": "worker"}},
        {"name": "delegate", "input": {"task": "x", "model": "nope"}},
        {"name": "delegate", "input": {"task": "x", "model": "worker", "sandbox": "copy"}},
        {"name": "delegate", "input": {"task": "x", "model": "worker", "tools": ["bash"]}}]},
      {"text": "Bad done."}]})");
    // Two delegate calls in one response (max_children).
    Script("twice", R"({"responses": [
      {"text": "Two.", "tool_calls": [
        {"name": "delegate", "input": {"task": "first", "model": "worker"}},
        {"name": "delegate", "input": {"task": "second", "model": "worker"}}]},
      {"text": "Twice done."}]})");
    // For the kill loop: two delegate calls in two turns, each child slow enough to be
    // under way when a harness dies.
    Script("boss_kill", R"({"responses": [
      {"text": "First.", "delay_ms": 150, "tool_calls": [{"name": "delegate", "input": {"task": "a", "model": "slow_worker"}}]},
      {"text": "Second.", "delay_ms": 150, "tool_calls": [{"name": "delegate", "input": {"task": "b", "model": "slow_worker"}}]},
      {"text": "Boss done."}]})");
    Script("slow_worker", R"({"responses": [{"text": "slow answer", "delay_ms": 600}]})");
    harness_ = Start("harness.json");
    ASSERT_NE(harness_, nullptr);
    base_ = harness_->url();
  }

  void Script(const std::string& name, const std::string& text) {
    AddScriptedModel(name, dir_.Sub(name + ".json"), text, &models_);
  }

  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "default_model": "boss", "models": {)" + models_ + R"(},
      "lease_ttl_ms": 1500, "scan_interval_ms": 300})";
  }

  std::unique_ptr<HarnessProcess> Start(const std::string& name) {
    auto h = std::make_unique<HarnessProcess>(dir_.Sub(name), Config());
    if (h->address.empty()) return nullptr;
    return h;
  }

  std::string Submit(const std::string& body) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  json::object Get(const std::string& id) {
    auto r = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    return r.json.at("session").as_object();
  }

  // The child ids of a parent's delegate tool_call events, in order.
  std::vector<std::string> ChildIds(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& c : OfType(AllEvents(base_, kKeyA, id), "tool_call")) {
      if (Str(c, "tool_name") == "delegate" && !Str(c, "child_session_id").empty()) {
        out.push_back(Str(c, "child_session_id"));
      }
    }
    return out;
  }

  // Every session of tenant A whose parent is `id`.
  std::vector<std::string> ListedChildren(const std::string& id) {
    std::vector<std::string> out;
    auto r = Api("GET", base_ + "/v1/sessions?limit=1000", kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    for (const auto& s : r.json.at("sessions").as_array()) {
      const auto& o = s.as_object();
      if (o.contains("parent_session_id") && o.at("parent_session_id").as_string() == id) {
        out.emplace_back(o.at("id").as_string());
      }
    }
    return out;
  }

  // Waits until a session's log has a tool_call of delegate naming its child; the child.
  std::string WaitForChild(const std::string& id) {
    for (int i = 0; i < 300; ++i) {
      auto ids = ChildIds(id);
      if (!ids.empty()) return ids.front();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }

  static std::string Reason(const std::vector<json::object>& events) {
    auto changes = OfType(events, "status_change");
    return changes.empty() ? "" : Str(changes.back(), "reason");
  }

  testing::TempDir dir_;
  std::string models_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

const char* kDelegating = R"({"prompt": "boss task", "delegate": {"enabled": true}})";

TEST_F(SubagentsTest, ADelegateCallRunsOneChildWhoseAnswerIsTheCallsResult) {
  const std::string id = Submit(kDelegating);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto calls = OfType(events, "tool_call");
  ASSERT_EQ(calls.size(), 1u);
  const std::string child = Str(calls[0], "child_session_id");
  ASSERT_EQ(child.size(), 32u);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(Str(results[0], "output"), "one two three four five six seven eight nine ten");
  EXPECT_EQ(Str(results[0], "child_session_id"), child);
  EXPECT_FALSE(results[0].contains("is_error") && results[0].at("is_error").as_bool());

  // The child names its parent and call, ran its own task on its own model, and ended.
  json::object c = Get(child);
  EXPECT_EQ(Str(c, "status"), "completed");
  EXPECT_EQ(Str(c, "parent_session_id"), id);
  EXPECT_EQ(Str(c, "parent_call_id"), Str(calls[0], "call_id"));
  auto child_events = AllEvents(base_, kKeyA, child);
  auto created = OfType(child_events, "session_created");
  ASSERT_EQ(created.size(), 1u);
  auto task = json::parse(Str(created[0], "task_json")).as_object();
  EXPECT_EQ(task.at("prompt").as_string(), "find the answer");
  EXPECT_EQ(task.at("model").as_string(), "worker");
  EXPECT_EQ(task.at("parent").at("session_id").as_string(), id);
  EXPECT_EQ(Str(created[0], "parent_session_id"), id);

  // The parent lists its one child; the listing shows the link too.
  json::object p = Get(id);
  ASSERT_TRUE(p.contains("children")) << json::serialize(p);
  ASSERT_EQ(p.at("children").as_array().size(), 1u);
  EXPECT_EQ(p.at("children").as_array()[0].at("session_id").as_string(), child);
  EXPECT_EQ(ListedChildren(id), std::vector<std::string>{child});
  // A session without delegate lists no children field, and names no parent.
  const std::string plain = Submit(R"({"prompt": "x", "model": "worker"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, plain, "completed,failed,cancelled"), "completed");
  json::object q = Get(plain);
  EXPECT_FALSE(q.contains("children"));
  EXPECT_FALSE(q.contains("parent_session_id"));
}

// `sinew replay` names the child of a delegate call, and --follow-children renders the
// child's events inside its parent's timeline.
TEST_F(SubagentsTest, ReplayNamesTheChildAndFollowsIt) {
  const std::string id = Submit(kDelegating);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  const std::string child = ChildIds(id).at(0);
  auto replay = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::BinaryPath("sinew"), "--server", base_, "--api-key", kKeyA, "replay", id};
    argv.insert(argv.end(), args.begin(), args.end());
    testing::Subprocess proc(argv, {"NO_COLOR=1", "HOME=/nonexistent"});
    std::string out;
    while (auto line = proc.ReadLine(std::chrono::seconds(60))) out += *line + "\n";
    EXPECT_EQ(proc.Wait(), 0) << out;
    return out;
  };
  const std::string plain = replay({});
  EXPECT_NE(plain.find("-> sub-agent " + child), std::string::npos) << plain;
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(plain, "session created"), 1u) << plain;  // the child's events are not in it
  const std::string followed = replay({"--follow-children"});
  EXPECT_NE(followed.find("  sub-agent " + child + ":"), std::string::npos) << followed;
  EXPECT_EQ(count(followed, "session created"), 2u) << followed;
  EXPECT_NE(followed.find("| "), std::string::npos) << followed;
  EXPECT_NE(followed.find("sub-agent of " + id), std::string::npos) << followed;  // the child's session_created
  // The summary counts the child's turn too: the parent's two and the child's one.
  EXPECT_NE(followed.find("-- 3 model turns"), std::string::npos) << followed;
}

TEST_F(SubagentsTest, AChildsTokensCountAgainstItsParentsBudget) {
  // The parent's first answer costs 9 tokens (a word and a call), which leaves 6 of 15 for
  // the child; the child's answer costs 10 (ten words), so the parent is past its limit.
  const std::string id =
      Submit(R"({"prompt": "boss task", "delegate": {"enabled": true}, "limits": {"max_output_tokens": 15}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "failed");
  auto events = AllEvents(base_, kKeyA, id);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].at("child_output_tokens").as_string(), "10");
  auto errors = OfType(events, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(Str(errors[0], "code"), "limit_exceeded");
  EXPECT_EQ(Str(errors[0], "limit"), "max_output_tokens");
  // The child got what the parent had left, not more.
  const std::string child = Str(results[0], "child_session_id");
  auto created = OfType(AllEvents(base_, kKeyA, child), "session_created");
  ASSERT_EQ(created.size(), 1u);
  auto task = json::parse(Str(created[0], "task_json")).as_object();
  EXPECT_EQ(task.at("limits").at("max_output_tokens").as_int64(), 6);
}

TEST_F(SubagentsTest, CancellingTheParentCancelsItsChildAndTheChildsChild) {
  const std::string id = Submit(R"({"prompt": "boss task", "model": "boss_mid", "delegate": {"enabled": true}})");
  const std::string mid = WaitForChild(id);
  ASSERT_FALSE(mid.empty());
  const std::string leaf = WaitForChild(mid);
  ASSERT_FALSE(leaf.empty());
  ASSERT_EQ(WaitForStatus(base_, kKeyA, leaf, "running"), "running");
  auto cancelled = Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyA);
  ASSERT_EQ(cancelled.status, 202) << cancelled.body;
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "cancelled");
  EXPECT_EQ(WaitForStatus(base_, kKeyA, mid, "completed,failed,cancelled"), "cancelled");
  EXPECT_EQ(WaitForStatus(base_, kKeyA, leaf, "completed,failed,cancelled"), "cancelled");
  // The parent's call has one result, which says so; the child says why it ended.
  auto results = OfType(AllEvents(base_, kKeyA, id), "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(Str(results[0], "output").find("cancelled"), std::string::npos) << Str(results[0], "output");
  EXPECT_NE(Reason(AllEvents(base_, kKeyA, mid)).find(id), std::string::npos);
  EXPECT_NE(Reason(AllEvents(base_, kKeyA, leaf)).find(mid), std::string::npos);
}

TEST_F(SubagentsTest, AnInterruptOfTheParentStopsItsChildAndTheParentGoesOn) {
  const std::string id = Submit(R"({"prompt": "boss task", "model": "boss_stuck", "delegate": {"enabled": true}})");
  const std::string child = WaitForChild(id);
  ASSERT_FALSE(child.empty());
  ASSERT_EQ(WaitForStatus(base_, kKeyA, child, "running"), "running");
  auto r = Api("POST", base_ + "/v1/sessions/" + id + "/interrupt", kKeyA, R"({"message": "never mind"})");
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  EXPECT_EQ(WaitForStatus(base_, kKeyA, child, "completed,failed,cancelled"), "cancelled");
  auto events = AllEvents(base_, kKeyA, id);
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].at("user_interrupted").as_bool());
  EXPECT_NE(Str(results[0], "output").find(child), std::string::npos);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(Str(responses[1], "text"), "Boss goes on.");
}

TEST_F(SubagentsTest, ABadDelegateConfigIs400AndCreatesNothing) {
  auto before = Api("GET", base_ + "/v1/sessions?limit=1000", kKeyA);
  ASSERT_EQ(before.status, 200);
  for (const char* body : {
           R"({"prompt": "x", "delegate": {"enabled": "yes"}})",
           R"({"prompt": "x", "delegate": {"enabled": true, "max_depth": 0}})",
           R"({"prompt": "x", "delegate": {"enabled": true, "max_depth": 17}})",
           R"({"prompt": "x", "delegate": {"enabled": true, "max_children": 0}})",
           R"({"prompt": "x", "delegate": {"enabled": true, "depth": 2}})",
           R"({"prompt": "x", "delegate": true})",
           R"({"prompt": "x", "tools": ["delegate"]})",
       }) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument") << body;
    EXPECT_NE(r.body.find("delegate"), std::string::npos) << body << " -> " << r.body;
  }
  auto after = Api("GET", base_ + "/v1/sessions?limit=1000", kKeyA);
  EXPECT_EQ(before.json.at("sessions").as_array().size(), after.json.at("sessions").as_array().size());
}

TEST_F(SubagentsTest, ADelegateCallOfASessionWithoutItIsAnErrorResultAndStartsNoChild) {
  const std::string id = Submit(R"({"prompt": "boss task"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto results = OfType(AllEvents(base_, kKeyA, id), "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].at("is_error").as_bool());
  EXPECT_NE(Str(results[0], "output").find("not available"), std::string::npos) << Str(results[0], "output");
  EXPECT_TRUE(ChildIds(id).empty());
  EXPECT_TRUE(ListedChildren(id).empty());
}

TEST_F(SubagentsTest, BadDelegateCallsAreErrorResultsThatStartNoChild) {
  const std::string id =
      Submit(R"({"prompt": "x", "model": "bad", "tools": ["delegate"], "delegate": {"enabled": true}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  auto results = OfType(AllEvents(base_, kKeyA, id), "tool_result");
  ASSERT_EQ(results.size(), 4u);
  const std::vector<std::string> says = {"input.task", "input.model 'nope'", "input.sandbox", "input.tools names 'bash'"};
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].at("is_error").as_bool());
    EXPECT_NE(Str(results[i], "output").find(says[i]), std::string::npos) << Str(results[i], "output");
  }
  EXPECT_TRUE(ChildIds(id).empty());
  EXPECT_TRUE(ListedChildren(id).empty());
}

TEST_F(SubagentsTest, DepthAndChildCountAreBounded) {
  // max_depth 1: the child may not delegate; its call is refused and it goes on.
  const std::string id =
      Submit(R"({"prompt": "x", "model": "boss_mid", "delegate": {"enabled": true, "max_depth": 1}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled"), "completed");
  const std::string mid = ChildIds(id).at(0);
  EXPECT_EQ(WaitForStatus(base_, kKeyA, mid, "completed,failed,cancelled"), "completed");
  auto mid_results = OfType(AllEvents(base_, kKeyA, mid), "tool_result");
  ASSERT_EQ(mid_results.size(), 1u);
  EXPECT_NE(Str(mid_results[0], "output").find("max_depth"), std::string::npos) << Str(mid_results[0], "output");
  EXPECT_TRUE(ListedChildren(mid).empty());
  // max_children 1: the second call of a response is refused.
  const std::string two =
      Submit(R"({"prompt": "x", "model": "twice", "delegate": {"enabled": true, "max_children": 1}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, two, "completed,failed,cancelled"), "completed");
  auto results = OfType(AllEvents(base_, kKeyA, two), "tool_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(Str(results[0], "output"), "one two three four five six seven eight nine ten");
  EXPECT_NE(Str(results[1], "output").find("max_children"), std::string::npos) << Str(results[1], "output");
  EXPECT_EQ(ListedChildren(two).size(), 1u);
}

// Two harnesses on one store; one of them, chosen at random, is SIGKILLed at a random
// moment while parents delegate, and restarted, again and again. Whatever the moment (the
// call written but no child yet, the child created, the child ended but its answer not
// recorded), each delegate call ends with exactly one child and exactly one result.
TEST_F(SubagentsTest, HarnessesKilledWhileParentsDelegateLeaveOneChildAndOneResultPerCall) {
  auto second = Start("harness2.json");
  ASSERT_NE(second, nullptr);
  std::vector<std::unique_ptr<HarnessProcess>> harnesses;
  harnesses.push_back(std::move(harness_));
  harnesses.push_back(std::move(second));
  std::vector<std::string> parents;
  for (int i = 0; i < 3; ++i) {
    base_ = harnesses[static_cast<size_t>(i % 2)]->url();
    parents.push_back(Submit(R"({"prompt": "boss task", "model": "boss_kill", "delegate": {"enabled": true}})"));
  }
  const int kills = std::getenv("SINEW_SUBAGENT_KILLS") ? std::atoi(std::getenv("SINEW_SUBAGENT_KILLS")) : 6;
  std::mt19937 rng(std::random_device{}());
  for (int k = 0; k < kills; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 900)(rng)));
    const size_t victim = std::uniform_int_distribution<size_t>(0, 1)(rng);
    harnesses[victim]->proc->Signal(SIGKILL);
    harnesses[victim]->proc->Wait();
    harnesses[victim] = Start("harness" + std::to_string(k + 3) + ".json");
    ASSERT_NE(harnesses[victim], nullptr);
  }
  base_ = harnesses[0]->url();
  for (const auto& id : parents) {
    ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed,cancelled", 120), "completed") << id;
    auto events = AllEvents(base_, kKeyA, id);
    std::map<std::string, int> results_per_call;
    for (const auto& r : OfType(events, "tool_result")) {
      ++results_per_call[Str(r, "call_id")];
      EXPECT_EQ(Str(r, "output"), "slow answer") << id;
    }
    std::set<std::string> calls;
    std::set<std::string> children;
    for (const auto& c : OfType(events, "tool_call")) {
      calls.insert(Str(c, "call_id"));
      children.insert(Str(c, "child_session_id"));
    }
    EXPECT_EQ(calls.size(), 2u) << id;
    EXPECT_EQ(children.size(), 2u) << id;
    for (const auto& call : calls) EXPECT_EQ(results_per_call[call], 1) << id << " " << call;
    // No child beyond the one of each call: every session naming this parent is one of them.
    auto listed = ListedChildren(id);
    EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), children) << id;
    for (const auto& child : children) {
      EXPECT_EQ(WaitForStatus(base_, kKeyA, child, "completed,failed,cancelled"), "completed") << child;
    }
  }
}

}  // namespace
}  // namespace sinew::harness::test
