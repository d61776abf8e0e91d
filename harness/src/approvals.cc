#include "approvals.h"

#include <algorithm>
#include <cctype>

#include "sinew/http/url.h"
#include "sinew/json_fields.h"
#include "tool_catalog.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ReadArray;
using json_fields::ReadString;
using json_fields::ReadUint32;
using json_fields::RejectUnknownKeys;

Result<ToolPolicy> PolicyOf(const json::value& v, const std::string& where) {
  if (v.is_string()) {
    const std::string s(v.as_string());
    if (s == "allow") return ToolPolicy::kAllow;
    if (s == "ask") return ToolPolicy::kAsk;
    if (s == "deny") return ToolPolicy::kDeny;
  }
  return Status::InvalidArgument(where + " must be one of allow, ask, deny");
}

Status ReadTimeout(const json::object& o, const std::string& where, uint32_t* out) {
  if (!json_fields::Has(o, "ask_timeout_seconds")) return Status::Ok();
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "ask_timeout_seconds", where, out));
  if (*out < 1 || *out > kMaxAskTimeoutSeconds) {
    return Status::InvalidArgument(where + ".ask_timeout_seconds must be between 1 and " +
                                   std::to_string(kMaxAskTimeoutSeconds));
  }
  return Status::Ok();
}

Status ReadStrings(const json::object& o, const char* key, const std::string& where,
                   std::vector<std::string>* out) {
  const json::array* a = nullptr;
  if (!ReadArray(o, key, where, &a).ok()) {
    return Status::InvalidArgument(where + "." + key + " must be an array of non-empty strings");
  }
  if (a == nullptr) return Status::Ok();
  for (const auto& v : *a) {
    if (!v.is_string() || v.as_string().empty() || v.as_string().size() > 1024) {
      return Status::InvalidArgument(where + "." + key +
                                     " must be an array of non-empty strings (up to 1024 bytes)");
    }
    out->emplace_back(v.as_string());
  }
  return Status::Ok();
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* ToolPolicyName(ToolPolicy p) {
  switch (p) {
    case ToolPolicy::kAllow:
      return "allow";
    case ToolPolicy::kAsk:
      return "ask";
    case ToolPolicy::kDeny:
      return "deny";
  }
  return "allow";
}

Result<ApprovalPolicy> ParseApprovalPolicy(const json::value& v, const std::string& where) {
  if (!v.is_object()) {
    return Status::InvalidArgument(
        where + " must be an object {\"default\", \"ask_timeout_seconds\", \"tools\"}");
  }
  const json::object& o = v.as_object();
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(o, "default,ask_timeout_seconds,tools", where));
  ApprovalPolicy p;
  p.present = true;
  if (const json::value* d = o.if_contains("default"); d != nullptr && !d->is_null()) {
    SINEW_ASSIGN_OR_RETURN(p.default_policy, PolicyOf(*d, where + ".default"));
  }
  SINEW_RETURN_IF_ERROR(ReadTimeout(o, where, &p.ask_timeout_seconds));
  const json::value* tools = o.if_contains("tools");
  if (tools == nullptr || tools->is_null()) return p;
  if (!tools->is_object())
    return Status::InvalidArgument(where + ".tools must be an object {\"<tool>\": policy}");
  for (const auto& kv : tools->as_object()) {
    const std::string name(kv.key());
    const std::string tw = where + ".tools." + name;
    if (FindTool(name) == nullptr) {
      std::string names;
      for (const auto& tool : ToolCatalog()) names += (names.empty() ? "" : ", ") + tool.name;
      return Status::InvalidArgument(where + ".tools names unknown tool '" + name +
                                     "'; tools: " + names);
    }
    ToolApprovalRule rule;
    if (kv.value().is_string()) {
      SINEW_ASSIGN_OR_RETURN(rule.policy, PolicyOf(kv.value(), tw));
    } else if (kv.value().is_object()) {
      const json::object& r = kv.value().as_object();
      std::string allowed = "policy,ask_timeout_seconds";
      if (name == "bash") allowed += ",allow_prefixes";
      if (name == "http_request") allowed += ",allow_hosts";
      SINEW_RETURN_IF_ERROR(RejectUnknownKeys(r, allowed, tw));
      if (!json_fields::Has(r, "policy")) {
        return Status::InvalidArgument(tw + ".policy is required (allow, ask or deny)");
      }
      SINEW_ASSIGN_OR_RETURN(rule.policy, PolicyOf(r.at("policy"), tw + ".policy"));
      SINEW_RETURN_IF_ERROR(ReadTimeout(r, tw, &rule.ask_timeout_seconds));
      SINEW_RETURN_IF_ERROR(ReadStrings(r, "allow_prefixes", tw, &rule.allow_prefixes));
      SINEW_RETURN_IF_ERROR(ReadStrings(r, "allow_hosts", tw, &rule.allow_hosts));
      for (auto& h : rule.allow_hosts) {
        h = Lower(h);
        if (h.find_first_of("/@ \t") != std::string::npos) {
          return Status::InvalidArgument(
              tw + ".allow_hosts entries are \"host\" or \"host:port\", not URLs ('" + h + "')");
        }
      }
    } else {
      return Status::InvalidArgument(
          tw + " must be \"allow\", \"ask\", \"deny\" or an object {\"policy\", ...}");
    }
    p.tools[name] = std::move(rule);
  }
  return p;
}

json::object ApprovalPolicyToJson(const ApprovalPolicy& p) {
  json::object tools;
  for (const auto& [name, rule] : p.tools) {
    json::object r{{"policy", ToolPolicyName(rule.policy)}};
    if (rule.ask_timeout_seconds != 0) r["ask_timeout_seconds"] = rule.ask_timeout_seconds;
    if (!rule.allow_prefixes.empty()) {
      json::array a;
      for (const auto& s : rule.allow_prefixes) a.emplace_back(s);
      r["allow_prefixes"] = std::move(a);
    }
    if (!rule.allow_hosts.empty()) {
      json::array a;
      for (const auto& s : rule.allow_hosts) a.emplace_back(s);
      r["allow_hosts"] = std::move(a);
    }
    tools[name] = std::move(r);
  }
  return json::object{{"default", ToolPolicyName(p.default_policy)},
                      {"ask_timeout_seconds", p.ask_timeout_seconds},
                      {"tools", std::move(tools)}};
}

bool BashPrefixAllows(const std::string& command, const std::string& prefix) {
  if (prefix.empty() || command.size() < prefix.size()) return false;
  // Leading blanks are not part of the command's name.
  size_t start = command.find_first_not_of(" \t");
  if (start == std::string::npos) return false;
  const std::string_view cmd = std::string_view(command).substr(start);
  if (cmd.substr(0, prefix.size()) != prefix) return false;
  if (cmd.size() > prefix.size() && prefix.back() != ' ' && cmd[prefix.size()] != ' ' &&
      cmd[prefix.size()] != '\t') {
    return false;  // "ls" is not a prefix of "lsblk"
  }
  // Anything that could run a second command makes it a command to ask about.
  if (cmd.find_first_of(";&|`<>\n\r") != std::string_view::npos) return false;
  if (cmd.find("$(") != std::string_view::npos) return false;
  return true;
}

ApprovalVerdict EvaluateApproval(const ApprovalPolicy& p, const std::string& tool,
                                 const std::string& input_json) {
  ApprovalVerdict v;
  if (!p.present) return v;
  auto it = p.tools.find(tool);
  const ToolApprovalRule* rule = it == p.tools.end() ? nullptr : &it->second;
  v.policy = rule != nullptr ? rule->policy : p.default_policy;
  v.ask_timeout_seconds = rule != nullptr && rule->ask_timeout_seconds != 0
                              ? rule->ask_timeout_seconds
                              : p.ask_timeout_seconds;
  const std::string whose = rule != nullptr ? "policy of " + tool : "default policy";
  v.reason = tool + ": " + whose + " is " + ToolPolicyName(v.policy);
  if (v.policy == ToolPolicy::kAllow || rule == nullptr) return v;
  boost::system::error_code ec;
  json::value input = json::parse(input_json, ec);
  const json::object* in = !ec && input.is_object() ? &input.as_object() : nullptr;
  if (tool == "bash" && !rule->allow_prefixes.empty()) {
    const std::string command = in != nullptr ? json_fields::StringField(*in, "command") : "";
    for (const auto& prefix : rule->allow_prefixes) {
      if (BashPrefixAllows(command, prefix)) {
        v.policy = ToolPolicy::kAllow;
        v.reason = "bash: command allowed by prefix '" + prefix + "'";
        return v;
      }
    }
    v.reason += "; no allowed prefix matches the command";
  }
  if (tool == "http_request" && !rule->allow_hosts.empty()) {
    const std::string url = in != nullptr ? json_fields::StringField(*in, "url") : "";
    auto parts = http::ParseUrl(url);
    if (parts.ok() && parts->user.empty() &&
        (parts->scheme == "http" || parts->scheme == "https")) {
      const std::string host = Lower(parts->host);
      const std::string host_port = host + ":" + parts->port;
      for (const auto& allowed : rule->allow_hosts) {
        if (allowed == host || allowed == host_port) {
          v.policy = ToolPolicy::kAllow;
          v.reason = "http_request: host '" + allowed + "' allowed";
          return v;
        }
      }
    }
    v.reason += "; the url's host is not an allowed host";
  }
  return v;
}

}  // namespace sinew::harness
