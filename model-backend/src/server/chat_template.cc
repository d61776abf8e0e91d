#include "sinew/model/chat_template.h"

#include <boost/json.hpp>
#include <string>

namespace sinew::model {
namespace {

// Jinja's `| trim`, which the Llama 3 template applies to every message.
std::string Trimmed(std::string_view text) {
  const std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kSpace);
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

ChatTemplate ChatTemplate::Detect(std::string_view jinja_source) {
  if (jinja_source.find("<|im_start|>") != std::string_view::npos) {
    return ChatTemplate(ChatTemplateKind::kChatMl);
  }
  if (jinja_source.find("<|start_header_id|>") != std::string_view::npos &&
      jinja_source.find("<|eot_id|>") != std::string_view::npos) {
    return ChatTemplate(ChatTemplateKind::kLlama3);
  }
  return ChatTemplate(ChatTemplateKind::kPlain);
}

std::string_view ChatTemplate::name() const {
  if (jinja_) return "jinja";
  switch (kind_) {
    case ChatTemplateKind::kChatMl:
      return "chatml";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kPlain:
      break;
  }
  return "plain";
}

// A forced call is one constrained JSON object after the family's opening text.
std::string_view ChatTemplate::ToolCallOpen() const {
  switch (tool_format_) {
    case ToolCallFormat::kHermes: return "<tool_call>\n";
    case ToolCallFormat::kMistral: return "[TOOL_CALLS]";
    case ToolCallFormat::kFirefunction: return " functools[";
    default: return "";
  }
}
std::string_view ChatTemplate::ToolCallClose() const {
  return tool_format_ == ToolCallFormat::kHermes ? "\n</tool_call>" : "";
}
std::string_view ChatTemplate::ToolArgumentsKey() const {
  return tool_format_ == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
}

namespace {

std::string ToolJson(const ChatTool& tool) {
  boost::json::object fn;
  fn["name"] = tool.name;
  fn["description"] = tool.description;
  boost::system::error_code ec;
  boost::json::value parameters = boost::json::parse(tool.parameters, ec);
  fn["parameters"] = ec ? boost::json::value(boost::json::object{}) : parameters;
  boost::json::object wrapped;
  wrapped["type"] = "function";
  wrapped["function"] = std::move(fn);
  return boost::json::serialize(wrapped);
}

}  // namespace

Result<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                         std::span<const ChatTool> tools,
                                         bool add_generation_prompt) const {
  if (jinja_) return RenderJinja(messages, tools, add_generation_prompt);
  return RenderBuiltIn(messages, tools, add_generation_prompt);
}

Result<std::string> ChatTemplate::RenderBuiltIn(std::span<const ChatMessage> messages,
                                                std::span<const ChatTool> tools,
                                                bool add_generation_prompt) const {
  if (messages.empty()) return Status::InvalidArgument("messages must not be empty");
  std::string tool_text;
  if (!tools.empty()) {
    if (kind_ == ChatTemplateKind::kLlama3) {
      tool_text =
          "Given the following functions, please respond with a JSON for a function call with "
          "its proper arguments that best answers the given prompt.\n\nRespond in the format "
          "{\"name\": function name, \"parameters\": dictionary of argument name and its "
          "value}. Do not use variables.\n\n";
      for (const ChatTool& tool : tools) tool_text += ToolJson(tool) + "\n\n";
    } else {
      tool_text =
          "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
          "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
      for (const ChatTool& tool : tools) tool_text += "\n" + ToolJson(tool);
      tool_text +=
          "\n</tools>\n\nFor each function call, return a json object with function name and "
          "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
          "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
    }
  }
  const bool system_first = messages.front().role == "system";
  std::string out;
  if (!tool_text.empty() && !system_first && kind_ != ChatTemplateKind::kLlama3) {
    out += kind_ == ChatTemplateKind::kChatMl ? "<|im_start|>system\n" + tool_text + "<|im_end|>\n"
                                              : tool_text + "\n\n";
  }
  bool tools_placed = kind_ != ChatTemplateKind::kLlama3;
  for (size_t index = 0; index < messages.size(); ++index) {
    const ChatMessage& message = messages[index];
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "tool") {
      return Status::InvalidArgument("messages[" + std::to_string(index) + "].role \"" +
                                     message.role + "\" is not system, user, assistant or tool");
    }
    std::string content = message.content;
    if (index == 0 && system_first && !tool_text.empty() && kind_ != ChatTemplateKind::kLlama3) {
      content += (content.empty() ? "" : "\n\n") + tool_text;
    }
    if (message.role == "user" && !tools_placed) {
      content = tool_text + content;
      tools_placed = true;
    }
    for (const ChatToolCall& call : message.tool_calls) {
      const std::string body = "{\"name\": \"" + call.name + "\", \"" +
                               std::string(ToolArgumentsKey()) + "\": " + call.arguments + "}";
      if (!content.empty()) content += "\n";
      content += std::string(ToolCallOpen()) + body + std::string(ToolCallClose());
    }
    switch (kind_) {
      case ChatTemplateKind::kChatMl:
        if (message.role == "tool") {
          out += "<|im_start|>user\n<tool_response>\n" + content + "\n</tool_response><|im_end|>\n";
        } else {
          out += "<|im_start|>" + message.role + "\n" + content + "<|im_end|>\n";
        }
        break;
      case ChatTemplateKind::kLlama3:
        out += "<|start_header_id|>" + (message.role == "tool" ? "ipython" : message.role) +
               "<|end_header_id|>\n\n" + Trimmed(content) + "<|eot_id|>";
        break;
      case ChatTemplateKind::kPlain:
        if (message.role == "system") {
          out += content + "\n\n";
        } else if (message.role == "tool") {
          out += "Tool: " + content + "\n";
        } else {
          out += (message.role == "user" ? "User: " : "Assistant: ") + content + "\n";
        }
        break;
    }
  }
  if (!add_generation_prompt) return out;
  switch (kind_) {
    case ChatTemplateKind::kChatMl:
      out += "<|im_start|>assistant\n";
      break;
    case ChatTemplateKind::kLlama3:
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplateKind::kPlain:
      out += "Assistant:";
      break;
  }
  return out;
}

std::vector<std::string> ChatTemplate::StopStrings() const {
  switch (kind_) {
    case ChatTemplateKind::kChatMl:
      return {"<|im_end|>"};
    case ChatTemplateKind::kLlama3:
      return {"<|eot_id|>"};
    case ChatTemplateKind::kPlain:
      break;
  }
  return {"\nUser:"};
}

}  // namespace sinew::model
