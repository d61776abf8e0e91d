#include "sinew/model/chat_template.h"

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

Result<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages) const {
  if (messages.empty()) return Status::InvalidArgument("messages must not be empty");
  std::string out;
  for (size_t index = 0; index < messages.size(); ++index) {
    const ChatMessage& message = messages[index];
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      return Status::InvalidArgument("messages[" + std::to_string(index) + "].role \"" +
                                     message.role + "\" is not system, user or assistant");
    }
    switch (kind_) {
      case ChatTemplateKind::kChatMl:
        out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
        break;
      case ChatTemplateKind::kLlama3:
        out += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" +
               Trimmed(message.content) + "<|eot_id|>";
        break;
      case ChatTemplateKind::kPlain:
        if (message.role == "system") {
          out += message.content + "\n\n";
        } else {
          out += (message.role == "user" ? "User: " : "Assistant: ") + message.content + "\n";
        }
        break;
    }
  }
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
