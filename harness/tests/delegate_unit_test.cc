// The pure parts of sub-agents (harness/src/delegate.h): the child's id from its call, the
// child's task from a delegate call and what its parent has left, and the call's result
// from the child's log.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "delegate.h"
#include "sinew/harness/config.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

HarnessConfig TwoModels() {
  auto c = ParseConfig(R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
    "models": {"m": {"kind": "scripted", "script": "/dev/null"}, "w": {"kind": "scripted", "script": "/dev/null"}}})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TaskSpec Parent() {
  TaskSpec t;
  t.model = "m";
  t.max_turns = 20;
  t.max_output_tokens = 1000;
  t.max_wall_seconds = 600;
  t.delegate.enabled = true;
  t.delegate.max_depth = 2;
  return t;
}

TEST(DelegateTest, AChildsIdIsTheSameForTheSameCallAndAValidSessionId) {
  const std::string parent = "0190a1b2c3d4e5f60718293a4b5c6d7e";
  const std::string a = ChildSessionId(parent, "p-3/call_0_0");
  EXPECT_EQ(a, ChildSessionId(parent, "p-3/call_0_0"));
  EXPECT_NE(a, ChildSessionId(parent, "p-9/call_0_0"));
  EXPECT_NE(a, ChildSessionId("0190a1b2c3d4ffffffffffffffffffff", "p-3/call_0_0"));
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a.substr(0, 12), parent.substr(0, 12));  // the parent's creation time
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(DelegateTest, AChildGetsNoMoreThanItsParentHasLeft) {
  const HarnessConfig config = TwoModels();
  auto child = ChildTask(R"({"task": "t", "model": "w", "limits": {"max_output_tokens": 500, "max_turns": 99}})",
                         Parent(), DelegateBudget{120, 30}, config);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(child->prompt, "t");
  EXPECT_EQ(child->model, "w");
  EXPECT_EQ(child->max_output_tokens, 120u);
  EXPECT_EQ(child->max_wall_seconds, 30u);
  EXPECT_EQ(child->max_turns, 20u);
  // One level less deep: it may delegate once more, and its child may not.
  EXPECT_TRUE(child->delegate.enabled);
  EXPECT_EQ(child->delegate.max_depth, 1u);
  auto grandchild = ChildTask(R"({"task": "t"})", *child, DelegateBudget{10, 10}, config);
  ASSERT_TRUE(grandchild.ok()) << grandchild.status().ToString();
  EXPECT_FALSE(grandchild->delegate.enabled);
  EXPECT_EQ(grandchild->model, "w");  // its parent's model by default
  auto asks = ChildTask(R"({"task": "t", "tools": ["delegate"]})", *child, DelegateBudget{10, 10}, config);
  ASSERT_FALSE(asks.ok());
  EXPECT_NE(asks.status().message().find("max_depth"), std::string::npos);
  auto spent = ChildTask(R"({"task": "t"})", Parent(), DelegateBudget{0, 10}, config);
  ASSERT_FALSE(spent.ok());
  EXPECT_NE(spent.status().message().find("no output tokens left"), std::string::npos);
}

TEST(DelegateTest, WrongInputNamesTheField) {
  const HarnessConfig config = TwoModels();
  for (const auto& [input, says] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "input"},
           {R"({"task": ""})", "input.task"},
           {R"({"task": "t", "extra": 1})", "extra"},
           {R"({"task": "t", "model": "x"})", "input.model"},
           {R"({"task": "t", "tools": "bash"})", "input.tools"},
           {R"({"task": "t", "tools": ["nope"]})", "'nope'"},
           {R"({"task": "t", "limits": {"max_turns": 0}})", "input.limits"},
           {R"({"task": "t", "sandbox": "old"})", "input.sandbox"}}) {
    auto child = ChildTask(input, Parent(), DelegateBudget{10, 10}, config);
    ASSERT_FALSE(child.ok()) << input;
    EXPECT_NE(child.status().message().find(says), std::string::npos) << input << ": " << child.status().message();
  }
}

TEST(DelegateTest, AForkTakesTheParentsSandboxSpecButNeverAnAttachedSandbox) {
  const HarnessConfig config = TwoModels();
  TaskSpec parent = Parent();
  parent.sandbox_json = R"({"memory_limit_bytes":268435456})";
  bool fork = false;
  auto child = ChildTask(R"({"task": "t", "sandbox": "fork"})", parent, DelegateBudget{10, 10}, config, &fork);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_TRUE(fork);
  EXPECT_EQ(child->sandbox_json, parent.sandbox_json);
  child = ChildTask(R"({"task": "t"})", parent, DelegateBudget{10, 10}, config, &fork);
  ASSERT_TRUE(child.ok());
  EXPECT_FALSE(fork) << "\"new\" is the default";

  parent.sandbox_json = R"({"attach":{"id":"sb-1","endpoint":"unix:///run/x"}})";
  child = ChildTask(R"({"task": "t", "sandbox": "fork"})", parent, DelegateBudget{10, 10}, config, &fork);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("attached"), std::string::npos) << child.status().message();
  child = ChildTask(R"({"task": "t"})", parent, DelegateBudget{10, 10}, config, &fork);
  ASSERT_TRUE(child.ok());
  EXPECT_TRUE(child->sandbox_json.empty()) << "a fresh sandbox, never the parent's attached one";
}

TEST(DelegateTest, AForkSnapshotSurvivesTheTaskJsonRoundTrip) {
  const HarnessConfig config = TwoModels();
  TaskSpec child = Parent();
  child.parent = ParentRef{"0123456789abcdef0123456789abcdef", "call-1", 7, "snap-00112233445566778899aabbccddeeff",
                           "127.0.0.1:5000"};
  auto back = TaskFromJson(TaskToJson(child), config);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->parent.sandbox_snapshot, child.parent.sandbox_snapshot);
  EXPECT_EQ(back->parent.snapshot_host_address, child.parent.snapshot_host_address);
  EXPECT_EQ(back->parent.call_seq, 7u);
}

TEST(DelegateTest, TheResultIsTheChildsLastAnswerOrWhyItEnded) {
  std::vector<v1::Event> log(4);
  log[0].mutable_session_created();
  log[1].mutable_model_response()->set_text("first");
  log[1].mutable_model_response()->mutable_usage()->set_completion_tokens(7);
  log[2].mutable_model_response()->set_text("final");
  log[2].mutable_model_response()->mutable_usage()->set_completion_tokens(5);
  log[3].mutable_status_change()->set_to(v1::SESSION_STATUS_COMPLETED);
  v1::Event done = ChildResultEvent("c1", "kid", log);
  EXPECT_EQ(done.tool_result().output(), "final");
  EXPECT_FALSE(done.tool_result().is_error());
  EXPECT_EQ(done.tool_result().child_output_tokens(), 12u);
  EXPECT_EQ(done.tool_result().child_session_id(), "kid");
  log[3].mutable_status_change()->set_to(v1::SESSION_STATUS_FAILED);
  log[3].mutable_status_change()->set_reason("limit reached: max_turns 1");
  v1::Event failed = ChildResultEvent("c1", "kid", log);
  EXPECT_TRUE(failed.tool_result().is_error());
  EXPECT_NE(failed.tool_result().output().find("failed: limit reached"), std::string::npos);
}

}  // namespace
}  // namespace sinew::harness
