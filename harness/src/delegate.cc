#include "delegate.h"

#include <openssl/evp.h>

#include <algorithm>
#include <boost/json.hpp>

#include "log_state.h"
#include "sinew/json_fields.h"
#include "sinew/session_store/session_store.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ReadString;

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
  return out;
}

bool Allows(const std::vector<std::string>& tools, const std::string& name) {
  return tools.empty() || std::find(tools.begin(), tools.end(), name) != tools.end();
}

}  // namespace

std::string ChildSessionId(const std::string& parent_id, const std::string& call_key) {
  const std::string text = parent_id + "/" + call_key;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  // 12 hex digits of the parent's creation time (a valid id has them), 20 of the digest.
  return parent_id.substr(0, 12) + Hex(digest, 10);
}

Result<TaskSpec> ChildTask(const std::string& input_json, const TaskSpec& parent, const DelegateBudget& budget,
                           const HarnessConfig& config, bool* fork_sandbox) {
  SINEW_ASSIGN_OR_RETURN(json::object in, json_fields::ParseObject(input_json, "input"));
  const std::string w = "input";
  SINEW_RETURN_IF_ERROR(json_fields::RejectUnknownKeys(in, "task,model,title,tools,limits,sandbox", w));
  TaskSpec child;
  SINEW_RETURN_IF_ERROR(ReadString(in, "task", w, &child.prompt));
  if (child.prompt.empty()) return Status::InvalidArgument("input.task is required (what the sub-agent is to do)");
  SINEW_RETURN_IF_ERROR(ReadString(in, "title", w, &child.title));
  SINEW_RETURN_IF_ERROR(ReadString(in, "model", w, &child.model));
  if (child.model.empty()) child.model = parent.model;
  if (!config.models.count(child.model)) {
    std::string names;
    for (const auto& [name, m] : config.models) names += (names.empty() ? "" : ", ") + name;
    return Status::InvalidArgument("input.model '" + child.model + "' is not configured; models: " + names);
  }
  const uint32_t depth_left = parent.delegate.max_depth > 0 ? parent.delegate.max_depth - 1 : 0;
  const json::array* tools = nullptr;
  if (!json_fields::ReadArray(in, "tools", w, &tools).ok()) {
    return Status::InvalidArgument("input.tools must be an array of tool names");
  }
  if (tools != nullptr) {
    for (const auto& v : *tools) {
      if (!v.is_string()) return Status::InvalidArgument("input.tools must be an array of tool names");
      const std::string name(v.as_string());
      if (FindTool(name) == nullptr || !Allows(parent.tools, name)) {
        return Status::InvalidArgument("input.tools names '" + name +
                                       "', which this session may not use; a sub-agent gets at most this "
                                       "session's tools");
      }
      if (name == kDelegateTool && depth_left == 0) {
        return Status::InvalidArgument("input.tools names delegate, but this session is at its max_depth of "
                                       "sub-agents: its children cannot start their own");
      }
      child.tools.push_back(name);
    }
    if (child.tools.empty()) return Status::InvalidArgument("input.tools must name at least one tool");
  } else {
    child.tools = parent.tools;
    if (depth_left == 0) std::erase(child.tools, std::string(kDelegateTool));
  }
  child.delegate.enabled = depth_left > 0 && (tools == nullptr || Allows(child.tools, std::string(kDelegateTool)));
  child.delegate.max_depth = std::max<uint32_t>(depth_left, 1);
  child.delegate.max_children = parent.delegate.max_children;

  std::string sandbox = "new";
  SINEW_RETURN_IF_ERROR(ReadString(in, "sandbox", w, &sandbox));
  if (sandbox != "new" && sandbox != "fork") return Status::InvalidArgument("input.sandbox must be \"new\" or \"fork\"");
  if (sandbox == "fork" && AttachesSandbox(parent.sandbox_json)) {
    return Status::InvalidArgument(
        "input.sandbox \"fork\": this session's sandbox is attached (its owner's), so it cannot be copied; use "
        "\"new\" and pass what the sub-agent needs in its task");
  }
  if (fork_sandbox != nullptr) *fork_sandbox = sandbox == "fork";
  // A sandbox like the parent's (a fresh one, or a copy of it); never the parent's attached
  // one (its owner's).
  if (!AttachesSandbox(parent.sandbox_json)) child.sandbox_json = parent.sandbox_json;

  if (budget.output_tokens == 0) {
    return Status::InvalidArgument("this session has no output tokens left (max_output_tokens " +
                                   std::to_string(parent.max_output_tokens) + ") for a sub-agent");
  }
  if (budget.wall_seconds == 0) {
    return Status::InvalidArgument("this session has no time left (max_wall_seconds " +
                                   std::to_string(parent.max_wall_seconds) + ") for a sub-agent");
  }
  child.max_turns = parent.max_turns;
  child.max_output_tokens = budget.output_tokens;
  child.max_wall_seconds = budget.wall_seconds;
  const json::object* limits = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadObject(in, "limits", w, &limits));
  if (limits != nullptr) {
    const std::string lw = "input.limits";
    SINEW_RETURN_IF_ERROR(json_fields::RejectUnknownKeys(*limits, "max_turns,max_output_tokens,max_wall_seconds", lw));
    uint32_t turns = child.max_turns;
    uint64_t tokens = child.max_output_tokens;
    uint32_t wall = child.max_wall_seconds;
    SINEW_RETURN_IF_ERROR(json_fields::ReadUint32(*limits, "max_turns", lw, &turns));
    SINEW_RETURN_IF_ERROR(json_fields::ReadUint(*limits, "max_output_tokens", lw, UINT64_MAX / 2, &tokens));
    SINEW_RETURN_IF_ERROR(json_fields::ReadUint32(*limits, "max_wall_seconds", lw, &wall));
    if (turns == 0 || tokens == 0 || wall == 0) return Status::InvalidArgument("input.limits values must be at least 1");
    // Never more than the parent has left: a child's use counts against its parent.
    child.max_turns = std::min(turns, child.max_turns);
    child.max_output_tokens = std::min(tokens, child.max_output_tokens);
    child.max_wall_seconds = std::min(wall, child.max_wall_seconds);
  }
  child.approvals = parent.approvals;
  return child;
}

v1::Event ChildResultEvent(const std::string& call_id, const std::string& child_id,
                           const std::vector<v1::Event>& child_log) {
  const LogState state = ReadLogState(child_log);
  std::string answer;
  for (auto it = child_log.rbegin(); it != child_log.rend(); ++it) {
    if (it->has_model_response() && !it->model_response().partial()) {
      answer = it->model_response().text();
      break;
    }
  }
  std::string reason;
  if (state.last_status_change >= 0) reason = child_log[static_cast<size_t>(state.last_status_change)].status_change().reason();
  v1::Event ev;
  auto* r = ev.mutable_tool_result();
  r->set_call_id(call_id);
  r->set_child_session_id(child_id);
  r->set_child_output_tokens(state.output_tokens);
  if (state.status == v1::SESSION_STATUS_COMPLETED) {
    r->set_output(answer.empty() ? "(the sub-agent " + child_id + " ended without an answer)" : answer);
    return ev;
  }
  r->set_is_error(true);
  std::string out = "the sub-agent " + child_id + " " + store::SessionStatusName(state.status) +
                    (reason.empty() ? "" : ": " + reason);
  if (!answer.empty()) out += "\nits last answer:\n" + answer;
  r->set_output(std::move(out));
  return ev;
}

}  // namespace sinew::harness
