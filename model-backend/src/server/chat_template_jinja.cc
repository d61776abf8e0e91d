// ChatTemplate over a model's own Jinja template: the context transformers gives a chat
// template, built from the request's messages and tools.
#include <boost/json.hpp>
#include <chrono>
#include <ctime>

#include "sinew/model/chat_template.h"
#include "sinew/model/jinja_template.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

// Tool-call arguments as the template wants them: the parsed object, or the JSON text.
json::value Arguments(const std::string& arguments, bool as_string) {
  if (as_string) return json::string(arguments);
  boost::system::error_code ec;
  json::value parsed = json::parse(arguments, ec);
  if (ec || !parsed.is_object()) return json::string(arguments);
  return parsed;
}

// The client's message (ChatMessage::json) with each tool call's function.arguments
// parsed from its JSON string, as Hugging Face expects (kept as the client's string for
// a template that wants strings).
json::object ClientMessage(const ChatMessage& message, bool string_arguments) {
  json::object out = message.json;
  json::value* calls = out.if_contains("tool_calls");
  if (string_arguments || calls == nullptr || !calls->is_array()) return out;
  for (json::value& call : calls->as_array()) {
    json::value* function = call.is_object() ? call.as_object().if_contains("function") : nullptr;
    json::value* arguments = function && function->is_object() ? function->as_object().if_contains("arguments") : nullptr;
    if (arguments == nullptr || !arguments->is_string()) continue;
    boost::system::error_code ec;
    json::value parsed = json::parse(arguments->as_string(), ec);
    if (!ec && parsed.is_object()) *arguments = std::move(parsed);
  }
  return out;
}

json::object MessageJson(const ChatMessage& message, bool string_arguments) {
  if (!message.json.empty()) return ClientMessage(message, string_arguments);
  json::object out;
  out["role"] = message.role;
  out["content"] = message.content_null ? json::value(nullptr) : json::value(message.content);
  if (!message.tool_calls.empty()) {
    json::array calls;
    for (const ChatToolCall& call : message.tool_calls) {
      json::object function{{"name", call.name}, {"arguments", Arguments(call.arguments, string_arguments)}};
      json::object item;
      if (!call.id.empty()) item["id"] = call.id;
      item["type"] = "function";
      item["function"] = std::move(function);
      calls.push_back(std::move(item));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!message.tool_call_id.empty()) out["tool_call_id"] = message.tool_call_id;
  if (!message.name.empty()) out["name"] = message.name;
  return out;
}

json::array ToolsJson(std::span<const ChatTool> tools) {
  json::array out;
  for (const ChatTool& tool : tools) {
    if (!tool.json.empty()) {  // the client's tool, as sent
      out.push_back(tool.json);
      continue;
    }
    boost::system::error_code ec;
    json::value parameters = json::parse(tool.parameters, ec);
    if (ec) parameters = json::object{};
    json::object function{{"name", tool.name}, {"description", tool.description}, {"parameters", parameters}};
    out.push_back(json::object{{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

std::string LocalTime(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

}  // namespace

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  const std::pair<std::string_view, ToolCallFormat> kMarkers[] = {
      {"tool▁calls▁begin", ToolCallFormat::kDeepSeekR1},
      {"<|START_ACTION|>", ToolCallFormat::kCommandR7B},
      {"[TOOL_CALLS]", ToolCallFormat::kMistral},
      {"functools[", ToolCallFormat::kFirefunction},
      {">>>", ToolCallFormat::kFunctionaryV32},
      {"<function=", ToolCallFormat::kFunctionaryV31},
      {"<tool_call>", ToolCallFormat::kHermes},
      {"<|start_header_id|>", ToolCallFormat::kLlama3Json},
  };
  for (const auto& [marker, format] : kMarkers) {
    if (source.find(marker) != std::string_view::npos) return format;
  }
  return ToolCallFormat::kHermes;
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kFunctionaryV31: return "functionary-v3.1";
    case ToolCallFormat::kFunctionaryV32: return "functionary-v3.2";
    case ToolCallFormat::kFirefunction: return "firefunction-v2";
    case ToolCallFormat::kCommandR7B: return "command-r7b";
    case ToolCallFormat::kDeepSeekR1: return "deepseek-r1";
  }
  return "hermes";
}

Result<ChatTemplate> ChatTemplate::FromJinja(std::string_view source, ChatTemplateTokens tokens) {
  Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
  if (!parsed.ok()) return parsed.status();
  ChatTemplate out = Detect(source);
  out.tool_format_ = DetectToolCallFormat(source);
  out.jinja_ = std::make_shared<const JinjaTemplate>(std::move(parsed).value());
  out.tokens_ = std::move(tokens);
  // Object arguments (transformers' convention) unless only JSON text renders. The call
  // message has null content, as OpenAI clients send it.
  const std::vector<ChatMessage> probe = {
      {"user", "What is the weather in Paris?"},
      {"assistant", "", {{"get_weather", R"({"location": "Paris"})", "call00001"}}, "", "", true},
      {"tool", "sunny", {}, "call00001", "get_weather"},
  };
  if (!out.RenderJinja(probe, {}, true).ok()) {
    out.string_arguments_ = true;
    if (!out.RenderJinja(probe, {}, true).ok()) out.string_arguments_ = false;
  }
  return out;
}

Result<std::string> ChatTemplate::RenderJinja(std::span<const ChatMessage> messages,
                                              std::span<const ChatTool> tools,
                                              bool add_generation_prompt) const {
  if (messages.empty()) return Status::InvalidArgument("messages must not be empty");
  json::array message_array;
  for (const ChatMessage& message : messages) message_array.push_back(MessageJson(message, string_arguments_));
  json::object context;
  context["messages"] = std::move(message_array);
  const json::array tool_array = ToolsJson(tools);
  if (!tools.empty()) context["tools"] = tool_array;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = tokens_.bos;
  context["eos_token"] = tokens_.eos;
  context["functions"] = json::serialize(tool_array);
  context["datetime"] = LocalTime("%Y-%m-%d %H:%M");
  return jinja_->Render(context);
}

}  // namespace sinew::model
