// Tool approval policies as pure functions (harness/src/approvals.h) and what the log
// says is pending (log_state.h).
#include <gtest/gtest.h>

#include "approvals.h"
#include "log_state.h"
#include "sinew/harness/config.h"
#include "task_spec.h"

namespace sinew::harness {
namespace {

ApprovalPolicy Parse(const std::string& text) {
  auto p = ParseApprovalPolicy(boost::json::parse(text), "body.approvals");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : ApprovalPolicy{};
}

TEST(ApprovalPolicyTest, BashPrefixesAllowWholeWordsAndNothingChained) {
  EXPECT_TRUE(BashPrefixAllows("ls", "ls"));
  EXPECT_TRUE(BashPrefixAllows("ls -la /tmp", "ls"));
  EXPECT_TRUE(BashPrefixAllows("  git status --short", "git status"));
  EXPECT_FALSE(BashPrefixAllows("lsblk", "ls"));
  EXPECT_FALSE(BashPrefixAllows("git push", "git status"));
  for (const char* chained : {"ls; rm -rf /", "ls && rm x", "ls | sh", "ls `rm x`", "ls $(rm x)",
                              "ls > /etc/passwd", "ls < x", "ls\nrm x", "ls & rm x"}) {
    EXPECT_FALSE(BashPrefixAllows(chained, "ls")) << chained;
  }
}

TEST(ApprovalPolicyTest, EachToolGetsItsRuleOrTheDefault) {
  const ApprovalPolicy p = Parse(R"({"default": "deny", "ask_timeout_seconds": 30, "tools": {
      "bash": {"policy": "ask", "allow_prefixes": ["ls", "cat "], "ask_timeout_seconds": 5},
      "http_request": {"policy": "ask", "allow_hosts": ["API.example.com", "127.0.0.1:8080"]},
      "read_file": "allow"}})");
  EXPECT_EQ(EvaluateApproval(p, "read_file", "{}").policy, ToolPolicy::kAllow);
  EXPECT_EQ(EvaluateApproval(p, "write_file", "{}").policy, ToolPolicy::kDeny);
  EXPECT_EQ(EvaluateApproval(p, "write_file", "{}").ask_timeout_seconds, 30u);
  auto ls = EvaluateApproval(p, "bash", R"({"command": "ls /"})");
  EXPECT_EQ(ls.policy, ToolPolicy::kAllow);
  EXPECT_NE(ls.reason.find("'ls'"), std::string::npos) << ls.reason;
  auto rm = EvaluateApproval(p, "bash", R"({"command": "rm -rf /"})");
  EXPECT_EQ(rm.policy, ToolPolicy::kAsk);
  EXPECT_EQ(rm.ask_timeout_seconds, 5u);
  EXPECT_EQ(EvaluateApproval(p, "bash", R"({"command": "cat /etc/hosts"})").policy,
            ToolPolicy::kAllow);
  EXPECT_EQ(
      EvaluateApproval(p, "http_request", R"({"url": "https://api.example.com/v1/x"})").policy,
      ToolPolicy::kAllow);
  EXPECT_EQ(EvaluateApproval(p, "http_request", R"({"url": "http://127.0.0.1:8080/"})").policy,
            ToolPolicy::kAllow);
  EXPECT_EQ(EvaluateApproval(p, "http_request", R"({"url": "http://127.0.0.1:9090/"})").policy,
            ToolPolicy::kAsk);
  EXPECT_EQ(EvaluateApproval(p, "http_request", R"({"url": "https://evil.example.com/"})").policy,
            ToolPolicy::kAsk);
  EXPECT_EQ(
      EvaluateApproval(p, "http_request", R"({"url": "https://user@api.example.com/"})").policy,
      ToolPolicy::kAsk);
  // No policy: everything is allowed.
  EXPECT_EQ(EvaluateApproval(ApprovalPolicy{}, "bash", R"({"command": "rm -rf /"})").policy,
            ToolPolicy::kAllow);
}

TEST(ApprovalPolicyTest, APolicyKeepsItsMeaningThroughTheStoredTask) {
  auto config = ParseConfig(R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
      "tenants": {"t": {"approvals": {"default": "ask", "tools": {"grep": "allow"}}}},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}})");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto task = ParseTaskRequest(R"({"prompt": "x", "approvals": {"tools": {"bash": {"policy": "ask",
      "allow_prefixes": ["ls"]}}}})",
                               *config);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  auto back = TaskFromJson(TaskToJson(*task), *config);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EvaluateApproval(back->approvals, "bash", R"({"command": "ls"})").policy,
            ToolPolicy::kAllow);
  EXPECT_EQ(EvaluateApproval(back->approvals, "bash", R"({"command": "rm x"})").policy,
            ToolPolicy::kAsk);
  // A task without a policy gets its tenant's default; one with a policy keeps its own.
  auto plain = ParseTaskRequest(R"({"prompt": "x"})", *config);
  ASSERT_TRUE(plain.ok());
  ApplyTenantApprovals(*config, "t", &*plain);
  EXPECT_EQ(EvaluateApproval(plain->approvals, "bash", "{}").policy, ToolPolicy::kAsk);
  EXPECT_EQ(EvaluateApproval(plain->approvals, "grep", "{}").policy, ToolPolicy::kAllow);
  ApplyTenantApprovals(*config, "t", &*task);
  EXPECT_EQ(EvaluateApproval(task->approvals, "grep", "{}").policy, ToolPolicy::kAllow);
  EXPECT_EQ(EvaluateApproval(task->approvals, "bash", R"({"command": "ls"})").policy,
            ToolPolicy::kAllow);
  ApplyTenantApprovals(*config, "someone-else", &*plain);
  // A bad tenant default stops the config.
  auto bad = ParseConfig(R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
      "tenants": {"t": {"approvals": {"default": "never"}}},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config.tenants.t.approvals.default"), std::string::npos)
      << bad.status().message();
}

TEST(ApprovalPolicyTest, TheLogSaysWhichCallsWaitAndANewResponseStartsAfresh) {
  std::vector<v1::Event> log(1);
  log[0].mutable_session_created();
  auto add = [&](auto fill) {
    v1::Event ev;
    fill(&ev);
    log.push_back(ev);
  };
  add([](v1::Event* e) { e->mutable_model_response()->add_tool_calls()->set_call_id("a"); });
  add([](v1::Event* e) { e->mutable_approval_requested()->set_call_id("a"); });
  add([](v1::Event* e) { e->mutable_approval_requested()->set_call_id("b"); });
  EXPECT_EQ(ReadLogState(log).PendingApprovals(), (std::vector<std::string>{"a", "b"}));
  add([](v1::Event* e) { e->mutable_approval_decided()->set_call_id("a"); });
  EXPECT_EQ(ReadLogState(log).PendingApprovals(), (std::vector<std::string>{"b"}));
  // A cancel gives a waiting call its result without a decision: it waits no longer.
  add([](v1::Event* e) { e->mutable_tool_result()->set_call_id("b"); });
  EXPECT_TRUE(ReadLogState(log).PendingApprovals().empty());
  add([](v1::Event* e) { e->mutable_model_response(); });
  const LogState s = ReadLogState(log);
  EXPECT_TRUE(s.approval_requested.empty());
  EXPECT_TRUE(s.approval_decided.empty());
}

}  // namespace
}  // namespace sinew::harness
