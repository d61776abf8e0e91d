// Chat templates: turn a list of chat messages into the prompt text a model was trained
// on. The GGUF's `tokenizer.chat_template` (a Jinja template) is not executed; it is
// recognised by signature as one of the known families, each rendered by a small
// built-in renderer. A model without a template (or with an unrecognised one) gets the
// documented plain fallback (docs/model-server.md):
//
//   [system content + "\n\n"]
//   "User: " + content + "\n"            for each user message
//   "Assistant: " + content + "\n"       for each assistant message
//   "Assistant:"                          generation prompt
//
// Thread-safety: ChatTemplate is an immutable value.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace sinew::model {

// A function call an assistant message made (OpenAI `tool_calls`).
struct ChatToolCall {
  std::string name;       // [A-Za-z0-9_-]{1,64}
  std::string arguments;  // JSON object text
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" (a tool's result)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant only
};

// A function the model may call (OpenAI `tools`), rendered the way the family expects.
struct ChatTool {
  std::string name;  // [A-Za-z0-9_-]{1,64}
  std::string description;
  std::string parameters;  // JSON schema text, "{}" if none
};

enum class ChatTemplateKind {
  kPlain,   // the fallback above
  kChatMl,  // <|im_start|>role\ncontent<|im_end|>\n (Qwen 2/3, many others)
  kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
};

class ChatTemplate {
 public:
  // Recognises `jinja_source` (empty: no template). Unknown templates give kPlain.
  static ChatTemplate Detect(std::string_view jinja_source);
  explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}

  ChatTemplateKind kind() const { return kind_; }
  // "plain", "chatml" or "llama3".
  std::string_view name() const;

  // Renders `messages` followed by the assistant generation prompt. The text has no
  // BOS: the tokenizer adds it when the vocabulary asks for it. Control tokens in the
  // text (e.g. "<|im_start|>") must be tokenized with parse_special.
  // With `tools`: ChatML (Qwen) lists them in the system message inside <tools></tools>
  // and asks for <tool_call>{"name": ..., "arguments": {...}}</tool_call>; Llama 3 puts
  // them in the first user message and asks for {"name": ..., "parameters": {...}}; the
  // plain fallback asks for <tool_call> like ChatML. Assistant tool calls and "tool"
  // results are rendered in the same family forms (Llama 3: role ipython).
  // Errors: InvalidArgument for no messages or a role other than system, user,
  // assistant or tool.
  [[nodiscard]] Result<std::string> Render(std::span<const ChatMessage> messages,
                                           std::span<const ChatTool> tools = {}) const;

  // How this family writes one tool call, and the text that opens it (ChatML and
  // plain: "<tool_call>\n"; Llama 3: "" since the call is a bare JSON object). The
  // arguments key is "arguments" (Llama 3: "parameters").
  std::string_view ToolCallOpen() const;
  std::string_view ToolCallClose() const;
  std::string_view ToolArgumentsKey() const;

  // Text-level stop strings this format needs besides the end-of-generation tokens
  // (the plain fallback stops when the model starts the next "User:" turn).
  std::vector<std::string> StopStrings() const;

 private:
  ChatTemplateKind kind_;
};

}  // namespace sinew::model
