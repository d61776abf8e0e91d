// Tool approvals (docs/harness.md, "Tool approvals"): a session's policy per tool (allow,
// ask or deny; for bash command prefixes allowed without asking, for http_request hosts),
// read from a task or a tenant's default, and what it says about one call. Pure
// functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "sinew/status.h"

namespace sinew::harness {

enum class ToolPolicy { kAllow, kAsk, kDeny };

const char* ToolPolicyName(ToolPolicy p);

// The longest and shortest wait for a decision, and the wait when a policy names none.
inline constexpr uint32_t kMaxAskTimeoutSeconds = 30 * 86400;
inline constexpr uint32_t kDefaultAskTimeoutSeconds = 3600;

struct ToolApprovalRule {
  ToolPolicy policy = ToolPolicy::kAllow;
  std::vector<std::string> allow_prefixes;  // bash: commands allowed without asking
  std::vector<std::string> allow_hosts;     // http_request: hosts ("host" or "host:port")
  uint32_t ask_timeout_seconds = 0;         // 0: the policy's
};

struct ApprovalPolicy {
  bool present = false;                            // false: no policy; every call is allowed
  ToolPolicy default_policy = ToolPolicy::kAllow;  // tools without a rule
  uint32_t ask_timeout_seconds = kDefaultAskTimeoutSeconds;
  std::map<std::string, ToolApprovalRule> tools;
};

// Reads an "approvals" object; errors are kInvalidArgument naming the field under `where`
// (e.g. "body.approvals.tools.bash.policy must be one of allow, ask, deny").
[[nodiscard]] Result<ApprovalPolicy> ParseApprovalPolicy(const boost::json::value& v,
                                                         const std::string& where);
// The normalized form (what ParseApprovalPolicy reads back to the same policy).
boost::json::object ApprovalPolicyToJson(const ApprovalPolicy& p);

// What the policy says about one call.
struct ApprovalVerdict {
  ToolPolicy policy = ToolPolicy::kAllow;
  std::string reason;  // why (shown in approval_requested and denials)
  uint32_t ask_timeout_seconds = 0;
};
ApprovalVerdict EvaluateApproval(const ApprovalPolicy& p, const std::string& tool,
                                 const std::string& input_json);

// True when `command` may run without asking because of `prefix`: it starts with the
// prefix at a word boundary and holds no shell operator that could chain another command
// (; & | ` $( > < or a newline), so "ls" allows "ls -la" but not "lsblk" or "ls; rm -rf /".
bool BashPrefixAllows(const std::string& command, const std::string& prefix);

}  // namespace sinew::harness
