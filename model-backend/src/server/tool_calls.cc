#include "tool_calls.h"

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

std::string_view Trim(std::string_view s) {
  const std::string_view kSpace = " \t\n\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

json::object OneCall(const ToolSpec& tool, std::string_view key) {
  json::object props;
  props["name"] = json::object{{"const", tool.name}};
  props[key] = tool.parameters;
  json::object schema;
  schema["type"] = "object";
  schema["properties"] = std::move(props);
  schema["required"] = json::array{"name", json::string(key)};
  return schema;
}

// {"name": "...", "arguments"|"parameters": {...} or "{...}"} -> a call.
bool ParseCall(std::string_view text, ToolCallOut& out) {
  boost::system::error_code ec;
  json::value v = json::parse(Trim(text), ec);
  if (ec || !v.is_object()) return false;
  const json::object& o = v.as_object();
  const json::value* name = o.if_contains("name");
  const json::value* args = o.if_contains("arguments");
  if (args == nullptr) args = o.if_contains("parameters");
  if (name == nullptr || !name->is_string() || args == nullptr) return false;
  json::value parsed_args = *args;
  if (args->is_string()) {
    parsed_args = json::parse(args->as_string(), ec);
    if (ec) return false;
  }
  if (!parsed_args.is_object()) return false;
  out.name = std::string(name->as_string());
  out.arguments = json::serialize(parsed_args);
  return true;
}

}  // namespace

json::value ToolCallSchema(const GenerationRequest& request, std::string_view arguments_key) {
  json::array options;
  for (const ToolSpec& tool : request.tools) {
    if (request.tool_choice == ToolChoice::kNamed && tool.name != request.tool_choice_name) {
      continue;
    }
    options.push_back(OneCall(tool, arguments_key));
  }
  if (options.size() == 1) return options[0];
  return json::object{{"anyOf", std::move(options)}};
}

ParsedToolOutput ParseToolCalls(std::string_view text, const ChatTemplate& chat_template,
                                bool forced) {
  ParsedToolOutput out;
  ToolCallOut call;
  if (forced || chat_template.kind() == ChatTemplateKind::kLlama3) {
    if (ParseCall(text, call)) {
      out.calls.push_back(std::move(call));
    } else {
      out.content = std::string(Trim(text));
    }
    return out;
  }
  const std::string_view open = "<tool_call>", close = "</tool_call>";
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, start - pos);
    const size_t body = start + open.size();
    size_t end = text.find(close, body);
    const size_t body_end = end == std::string_view::npos ? text.size() : end;
    if (ParseCall(text.substr(body, body_end - body), call)) {
      out.calls.push_back(call);
    } else {
      content += text.substr(start, body_end - start);
      if (end != std::string_view::npos) content += close;
    }
    pos = end == std::string_view::npos ? text.size() : end + close.size();
  }
  out.content = std::string(Trim(content));
  return out;
}

std::string ToolCallStreamFilter::Push(std::string_view text) {
  all_ += text;
  if (forced_ || in_call_) return {};
  if (template_.kind() == ChatTemplateKind::kLlama3) {
    const std::string_view t = Trim(all_);
    if (t.empty()) return {};
    if (t.front() == '{') {
      in_call_ = true;
      return {};
    }
    std::string out = all_.substr(emitted_);
    emitted_ = all_.size();
    return out;
  }
  const std::string_view open = "<tool_call>";
  const size_t found = all_.find(open, emitted_);
  size_t safe = all_.size();
  if (found != std::string::npos) {
    in_call_ = true;
    safe = found;
  } else {
    // Hold a tail that could be the start of "<tool_call>".
    for (size_t keep = std::min(open.size() - 1, all_.size() - emitted_); keep > 0; --keep) {
      if (open.starts_with(std::string_view(all_).substr(all_.size() - keep))) {
        safe = all_.size() - keep;
        break;
      }
    }
  }
  std::string out = all_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

ParsedToolOutput ToolCallStreamFilter::Finish(std::string* held_content) {
  ParsedToolOutput parsed = ParseToolCalls(all_, template_, forced_);
  held_content->clear();
  if (parsed.calls.empty()) *held_content = all_.substr(emitted_);
  return parsed;
}

}  // namespace sinew::model
