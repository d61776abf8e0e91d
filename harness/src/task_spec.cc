#include "task_spec.h"

#include <algorithm>

#include "sinew/json_fields.h"
#include "tool_catalog.h"

namespace sinew::harness {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadObject;
using json_fields::ReadString;
using json_fields::ReadUint;
using json_fields::ReadUint32;
using json_fields::RejectUnknownKeys;

bool AttachesSandbox(const std::string& sandbox_json) {
  if (sandbox_json.empty()) return false;
  boost::system::error_code ec;
  json::value v = json::parse(sandbox_json, ec);
  return !ec && v.is_object() && v.as_object().contains("attach");
}

namespace {

// body.delegate: {"enabled", "max_children", "max_depth"}; the delegate tool in body.tools
// needs it enabled.
Status ParseDelegateSpec(const json::object& o, TaskSpec* t) {
  const json::object* d = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(o, "delegate", "body", &d));
  if (d != nullptr) {
    const std::string dw = "body.delegate";
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(*d, "enabled,max_children,max_depth", dw));
    SINEW_RETURN_IF_ERROR(json_fields::ReadBool(*d, "enabled", dw, &t->delegate.enabled));
    uint64_t v = t->delegate.max_children;
    SINEW_RETURN_IF_ERROR(ReadUint(*d, "max_children", dw, kMaxDelegateChildren, &v));
    if (v == 0) return Status::InvalidArgument("body.delegate.max_children must be at least 1");
    t->delegate.max_children = static_cast<uint32_t>(v);
    v = t->delegate.max_depth;
    SINEW_RETURN_IF_ERROR(ReadUint(*d, "max_depth", dw, kMaxDelegateDepth, &v));
    if (v == 0) return Status::InvalidArgument("body.delegate.max_depth must be at least 1");
    t->delegate.max_depth = static_cast<uint32_t>(v);
  }
  if (!t->delegate.enabled && std::find(t->tools.begin(), t->tools.end(), "delegate") != t->tools.end()) {
    return Status::InvalidArgument("body.tools names delegate, which needs body.delegate.enabled: true");
  }
  return Status::Ok();
}

}  // namespace

Result<TaskSpec> ParseTaskRequest(std::string_view body, const HarnessConfig& config) {
  SINEW_ASSIGN_OR_RETURN(json::object o, ParseObject(body, "request body"));
  const std::string w = "body";
  SINEW_RETURN_IF_ERROR(
      RejectUnknownKeys(o, "prompt,title,model,system,tools,sandbox,limits,metadata,approvals,keep_open,idle_close_seconds,idle_pause_seconds,snapshots,delegate",
                        w));
  TaskSpec t;
  if (!json_fields::Has(o, "prompt"))
    return Status::InvalidArgument("body.prompt is required (the task, a string)");
  SINEW_RETURN_IF_ERROR(ReadString(o, "prompt", w, &t.prompt));
  if (t.prompt.empty()) return Status::InvalidArgument("body.prompt must not be empty");
  SINEW_RETURN_IF_ERROR(ReadString(o, "title", w, &t.title));
  SINEW_RETURN_IF_ERROR(ReadString(o, "model", w, &t.model));
  SINEW_RETURN_IF_ERROR(ReadString(o, "system", w, &t.system));
  if (t.model.empty()) t.model = config.default_model;
  if (!config.models.count(t.model)) {
    std::string names;
    for (const auto& [name, m] : config.models) names += (names.empty() ? "" : ", ") + name;
    return Status::InvalidArgument("body.model '" + t.model + "' is not configured; models: " + names);
  }
  const json::array* tools = nullptr;
  if (!json_fields::ReadArray(o, "tools", w, &tools).ok()) {
    return Status::InvalidArgument("body.tools must be an array of tool names");
  }
  for (size_t index = 0; tools != nullptr && index < tools->size(); ++index) {
    const json::value& v = (*tools)[index];
    if (!v.is_string()) return Status::InvalidArgument("body.tools must be an array of tool names");
    std::string name(v.as_string());
    if (FindTool(name) == nullptr) {
      std::string names;
      for (const auto& tool : ToolCatalog()) names += (names.empty() ? "" : ", ") + tool.name;
      return Status::InvalidArgument("body.tools names unknown tool '" + name +
                                     "'; tools: " + names);
    }
    t.tools.push_back(name);
  }
  if (config.models.at(t.model).kind == kBuiltinOracleKind) {
    // The oracle runs the prompt with bash in a sandbox: it needs both.
    if (config.sandboxd_address.empty() && config.sandboxd_etcd.empty()) {
      return Status::InvalidArgument("body.model 'oracle' runs the prompt as a bash command in a sandbox, and "
                                     "this harness has no sandboxd (config.sandboxd.address)");
    }
    if (!t.tools.empty() && std::find(t.tools.begin(), t.tools.end(), "bash") == t.tools.end()) {
      return Status::InvalidArgument("body.tools must include bash for body.model 'oracle' (it runs the prompt "
                                     "with bash)");
    }
  }
  const json::object* sandbox = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(o, "sandbox", w, &sandbox));
  if (sandbox != nullptr) {
    const auto& s = *sandbox;
    const std::string sw = "body.sandbox";
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(
        s, "cpu_millis,memory_bytes,memory_limit_bytes,pids,disk_bytes,lifetime_seconds,network,image,runtime,attach",
        sw));
    // An existing sandbox of the caller's (an evaluation runner's): used, never destroyed.
    // Present means attach (AttachesSandbox), so a null is refused here too.
    if (const json::value* a = s.if_contains("attach")) {
      if (!a->is_object()) {
        return Status::InvalidArgument("body.sandbox.attach must be an object {\"id\", \"endpoint\"}");
      }
      const auto& at = a->as_object();
      SINEW_RETURN_IF_ERROR(RejectUnknownKeys(at, "id,endpoint", sw + ".attach"));
      std::string id, endpoint;
      SINEW_RETURN_IF_ERROR(ReadString(at, "id", sw + ".attach", &id));
      SINEW_RETURN_IF_ERROR(ReadString(at, "endpoint", sw + ".attach", &endpoint));
      if (id.empty() || endpoint.rfind("unix://", 0) != 0) {
        return Status::InvalidArgument(
            "body.sandbox.attach needs a sandbox id and its endpoint (unix://...)");
      }
    }
    uint64_t scratch = 0;
    for (const char* key : {"cpu_millis", "memory_bytes", "memory_limit_bytes", "pids", "disk_bytes",
                            "lifetime_seconds"}) {
      SINEW_RETURN_IF_ERROR(ReadUint(s, key, sw, UINT64_MAX / 2, &scratch));
    }
    std::string text;
    SINEW_RETURN_IF_ERROR(ReadString(s, "network", sw, &text));
    SINEW_RETURN_IF_ERROR(ReadString(s, "image", sw, &text));
    SINEW_RETURN_IF_ERROR(ReadString(s, "runtime", sw, &text));
    if (!text.empty() && text != "runc" && text != "runsc") {
      return Status::InvalidArgument("body.sandbox.runtime must be \"runc\" or \"runsc\"");
    }
    t.sandbox_json = json::serialize(s);
  }
  t.max_turns = config.limits.max_turns;
  t.max_output_tokens = config.limits.max_output_tokens;
  t.max_wall_seconds = config.limits.max_wall_seconds;
  const json::object* limits = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(o, "limits", w, &limits));
  if (limits != nullptr) {
    const auto& l = *limits;
    const std::string lw = "body.limits";
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(l, "max_turns,max_output_tokens,max_wall_seconds", lw));
    SINEW_RETURN_IF_ERROR(ReadUint32(l, "max_turns", lw, &t.max_turns));
    SINEW_RETURN_IF_ERROR(ReadUint(l, "max_output_tokens", lw, UINT64_MAX / 2, &t.max_output_tokens));
    SINEW_RETURN_IF_ERROR(ReadUint32(l, "max_wall_seconds", lw, &t.max_wall_seconds));
    if (t.max_turns == 0 || t.max_output_tokens == 0 || t.max_wall_seconds == 0) {
      return Status::InvalidArgument("body.limits values must be at least 1");
    }
  }
  if (const json::value* approvals = o.if_contains("approvals"); approvals != nullptr && !approvals->is_null()) {
    SINEW_ASSIGN_OR_RETURN(t.approvals, ParseApprovalPolicy(*approvals, "body.approvals"));
  }
  SINEW_RETURN_IF_ERROR(json_fields::ReadBool(o, "keep_open", w, &t.keep_open));
  if (json_fields::Has(o, "idle_close_seconds")) {
    if (!t.keep_open) {
      return Status::InvalidArgument("body.idle_close_seconds applies only to a session with keep_open: true");
    }
    uint64_t idle = 0;
    SINEW_RETURN_IF_ERROR(ReadUint(o, "idle_close_seconds", w, kMaxIdleCloseSeconds, &idle));
    if (idle == 0) return Status::InvalidArgument("body.idle_close_seconds must be at least 1");
    t.idle_close_seconds = static_cast<uint32_t>(idle);
  }
  if (json_fields::Has(o, "idle_pause_seconds")) {
    uint64_t idle = 0;
    SINEW_RETURN_IF_ERROR(ReadUint(o, "idle_pause_seconds", w, kMaxIdlePauseSeconds, &idle));
    if (idle == 0) return Status::InvalidArgument("body.idle_pause_seconds must be at least 1 (leave it out: never)");
    if (AttachesSandbox(t.sandbox_json)) {
      return Status::InvalidArgument(
          "body.idle_pause_seconds does not apply to an attached sandbox (body.sandbox.attach): its owner "
          "pauses it");
    }
    t.idle_pause_seconds = static_cast<uint32_t>(idle);
  }
  if (json_fields::Has(o, "snapshots")) {
    std::string policy;
    SINEW_RETURN_IF_ERROR(ReadString(o, "snapshots", w, &policy));
    auto parsed = ParseSnapshotPolicy(policy);
    if (!parsed) {
      return Status::InvalidArgument("body.snapshots must be \"none\", \"on_pause\" or \"per_call\" (got \"" +
                                     policy.substr(0, 32) + "\")");
    }
    if (*parsed != SnapshotPolicy::kNone && AttachesSandbox(t.sandbox_json)) {
      return Status::InvalidArgument(
          "body.snapshots does not apply to an attached sandbox (body.sandbox.attach): its owner snapshots it");
    }
    t.snapshots = *parsed;
  }
  SINEW_RETURN_IF_ERROR(ParseDelegateSpec(o, &t));
  const json::object* metadata = nullptr;
  if (!ReadObject(o, "metadata", w, &metadata).ok()) {
    return Status::InvalidArgument("body.metadata must be an object of strings");
  }
  if (metadata != nullptr) {
    for (const auto& kv : *metadata) {
      if (!kv.value().is_string()) {
        return Status::InvalidArgument("body.metadata." + std::string(kv.key()) + " must be a string");
      }
      t.metadata[std::string(kv.key())] = std::string(kv.value().as_string());
    }
  }
  return t;
}

std::string TaskToJson(const TaskSpec& t) {
  json::object o{{"prompt", t.prompt}, {"model", t.model}, {"system", t.system}};
  json::array tools;
  for (const auto& n : t.tools) tools.push_back(json::value(n));
  o["tools"] = std::move(tools);
  if (!t.sandbox_json.empty()) o["sandbox"] = json::parse(t.sandbox_json);
  o["limits"] = json::object{{"max_turns", t.max_turns},
                             {"max_output_tokens", t.max_output_tokens},
                             {"max_wall_seconds", t.max_wall_seconds}};
  if (t.approvals.present) o["approvals"] = ApprovalPolicyToJson(t.approvals);
  if (t.keep_open) {
    o["keep_open"] = true;
    o["idle_close_seconds"] = t.idle_close_seconds;
  }
  if (t.idle_pause_seconds > 0) o["idle_pause_seconds"] = t.idle_pause_seconds;
  if (t.snapshots != SnapshotPolicy::kNone) o["snapshots"] = SnapshotPolicyName(t.snapshots);
  if (t.delegate.enabled) {
    o["delegate"] = json::object{{"enabled", true},
                                 {"max_children", t.delegate.max_children},
                                 {"max_depth", t.delegate.max_depth}};
  }
  if (!t.parent.session_id.empty()) {
    json::object parent{{"session_id", t.parent.session_id},
                        {"call_id", t.parent.call_id},
                        {"call_seq", t.parent.call_seq}};
    if (!t.parent.sandbox_snapshot.empty()) {
      parent["sandbox_snapshot"] = t.parent.sandbox_snapshot;
      parent["snapshot_host_address"] = t.parent.snapshot_host_address;
    }
    o["parent"] = std::move(parent);
  }
  return json::serialize(o);
}

Result<TaskSpec> TaskFromJson(const std::string& task_json, const HarnessConfig& config) {
  SINEW_ASSIGN_OR_RETURN(json::object o, ParseObject(task_json, "session_created.task_json"));
  TaskSpec t;
  const std::string w = "task_json";
  SINEW_RETURN_IF_ERROR(ReadString(o, "prompt", w, &t.prompt));
  SINEW_RETURN_IF_ERROR(ReadString(o, "model", w, &t.model));
  SINEW_RETURN_IF_ERROR(ReadString(o, "system", w, &t.system));
  if (t.model.empty() || !config.models.count(t.model)) t.model = config.default_model;
  if (const json::array* tools = json_fields::ArrayField(o, "tools")) {
    for (const auto& v : *tools) {
      if (v.is_string()) t.tools.emplace_back(v.as_string());
    }
  }
  if (const json::object* sandbox = json_fields::ObjectField(o, "sandbox")) {
    t.sandbox_json = json::serialize(*sandbox);
  }
  t.max_turns = config.limits.max_turns;
  t.max_output_tokens = config.limits.max_output_tokens;
  t.max_wall_seconds = config.limits.max_wall_seconds;
  if (const json::object* limits = json_fields::ObjectField(o, "limits")) {
    const auto& l = *limits;
    SINEW_RETURN_IF_ERROR(ReadUint32(l, "max_turns", w, &t.max_turns));
    SINEW_RETURN_IF_ERROR(ReadUint(l, "max_output_tokens", w, UINT64_MAX / 2, &t.max_output_tokens));
    SINEW_RETURN_IF_ERROR(ReadUint32(l, "max_wall_seconds", w, &t.max_wall_seconds));
  }
  if (const json::value* approvals = o.if_contains("approvals"); approvals != nullptr && !approvals->is_null()) {
    SINEW_ASSIGN_OR_RETURN(t.approvals, ParseApprovalPolicy(*approvals, "task_json.approvals"));
  }
  SINEW_RETURN_IF_ERROR(json_fields::ReadBool(o, "keep_open", w, &t.keep_open));
  if (t.keep_open) {
    uint64_t idle = t.idle_close_seconds;
    SINEW_RETURN_IF_ERROR(ReadUint(o, "idle_close_seconds", w, kMaxIdleCloseSeconds, &idle));
    t.idle_close_seconds = static_cast<uint32_t>(std::max<uint64_t>(idle, 1));
  }
  uint64_t idle_pause = 0;
  SINEW_RETURN_IF_ERROR(ReadUint(o, "idle_pause_seconds", w, kMaxIdlePauseSeconds, &idle_pause));
  t.idle_pause_seconds = static_cast<uint32_t>(idle_pause);
  std::string snapshots;
  SINEW_RETURN_IF_ERROR(ReadString(o, "snapshots", w, &snapshots));
  t.snapshots = ParseSnapshotPolicy(snapshots).value_or(SnapshotPolicy::kNone);
  if (const json::object* d = json_fields::ObjectField(o, "delegate")) {
    SINEW_RETURN_IF_ERROR(json_fields::ReadBool(*d, "enabled", w, &t.delegate.enabled));
    SINEW_RETURN_IF_ERROR(ReadUint32(*d, "max_children", w, &t.delegate.max_children));
    SINEW_RETURN_IF_ERROR(ReadUint32(*d, "max_depth", w, &t.delegate.max_depth));
  }
  if (const json::object* p = json_fields::ObjectField(o, "parent")) {
    SINEW_RETURN_IF_ERROR(ReadString(*p, "session_id", w, &t.parent.session_id));
    SINEW_RETURN_IF_ERROR(ReadString(*p, "call_id", w, &t.parent.call_id));
    SINEW_RETURN_IF_ERROR(ReadUint(*p, "call_seq", w, UINT64_MAX / 2, &t.parent.call_seq));
    SINEW_RETURN_IF_ERROR(ReadString(*p, "sandbox_snapshot", w, &t.parent.sandbox_snapshot));
    SINEW_RETURN_IF_ERROR(ReadString(*p, "snapshot_host_address", w, &t.parent.snapshot_host_address));
  }
  return t;
}

std::optional<SnapshotPolicy> ParseSnapshotPolicy(std::string_view name) {
  if (name.empty() || name == "none") return SnapshotPolicy::kNone;
  if (name == "on_pause") return SnapshotPolicy::kOnPause;
  if (name == "per_call") return SnapshotPolicy::kPerCall;
  return std::nullopt;
}

const char* SnapshotPolicyName(SnapshotPolicy policy) {
  switch (policy) {
    case SnapshotPolicy::kOnPause:
      return "on_pause";
    case SnapshotPolicy::kPerCall:
      return "per_call";
    case SnapshotPolicy::kNone:
      break;
  }
  return "none";
}

void ApplyTenantApprovals(const HarnessConfig& config, const std::string& tenant, TaskSpec* task) {
  if (task->approvals.present) return;
  auto it = config.tenants.find(tenant);
  if (it == config.tenants.end() || it->second.approvals_json.empty()) return;
  boost::system::error_code ec;
  json::value v = json::parse(it->second.approvals_json, ec);
  if (ec) return;
  // Checked when the config was read.
  if (auto p = ParseApprovalPolicy(v, "config.tenants." + tenant + ".approvals"); p.ok()) task->approvals = *p;
}

}  // namespace sinew::harness
