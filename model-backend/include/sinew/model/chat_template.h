// Chat templates: turn a list of chat messages into the prompt text a model was trained
// on. A model's own template (the GGUF's `tokenizer.chat_template`, or a file given with
// --chat-template) is executed by the Jinja interpreter (sinew/model/jinja_template.h)
// exactly as transformers renders it. Built-in renderers remain only as the fallback for
// a model file without a template; the plain one is documented in docs/model-server.md:
//
//   [system content + "\n\n"]
//   "User: " + content + "\n"            for each user message
//   "Assistant: " + content + "\n"       for each assistant message
//   "Assistant:"                          generation prompt
//
// Thread-safety: ChatTemplate is an immutable value.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "sinew/status.h"

namespace sinew::model {

// A function call an assistant message made (OpenAI `tool_calls`).
struct ChatToolCall {
  std::string name;       // [A-Za-z0-9_-]{1,64}
  std::string arguments;  // JSON object text
  std::string id = {};    // the call's id ("" if the client gave none)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" (a tool's result)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant only
  std::string tool_call_id = {};  // tool: the call this answers ("" if none given)
  std::string name = {};          // tool: the function's name ("" if none given)
  bool content_null = false;      // content was null (an assistant message with only calls)
  // The message as the client sent it (role and content as above, the rest as sent):
  // what a Jinja template gets, each tool call's function.arguments parsed from its JSON
  // string (see FromJinja). Empty: the template gets a message built from the fields above.
  boost::json::object json = {};
};

// The special-token texts a Jinja template may print ({{ bos_token }}, {{ eos_token }}).
struct ChatTemplateTokens {
  std::string bos;  // "" if the vocabulary has none
  std::string eos;
};

// A function the model may call (OpenAI `tools`), rendered the way the family expects.
struct ChatTool {
  std::string name;  // [A-Za-z0-9_-]{1,64}
  std::string description;
  std::string parameters;  // JSON schema text, "{}" if none
  // The tool object as the client sent it ({"type": "function", "function": {...}}),
  // what a Jinja template gets. Empty: the template gets one built from the fields above.
  boost::json::object json = {};
};

enum class ChatTemplateKind {
  kPlain,   // the fallback above
  kChatMl,  // <|im_start|>role\ncontent<|im_end|>\n (Qwen 2/3, many others)
  kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
};

// How a model family writes tool calls in its output (parsed by the server's
// tool_call_parser.h into OpenAI tool_calls).
enum class ToolCallFormat {
  kHermes,         // <tool_call>{"name","arguments"}</tool_call> (Qwen 2.5/3, Hermes, fallback)
  kLlama3Json,     // {"name","parameters"} or <|python_tag|>{...} / name.call(k=v) (Llama 3.x)
  kMistral,        // [TOOL_CALLS][{"name","arguments","id"}]
  kFunctionaryV31, // <function=name>{...}</function>
  kFunctionaryV32, // >>>name\n{...} segments (>>>all\n is content)
  kFirefunction,   // functools[{"name","arguments"}]
  kCommandR7B,     // <|START_ACTION|>[{"tool_name","parameters"}]<|END_ACTION|>
  kDeepSeekR1,     // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json...
};
// Recognises the family from the template text (kHermes when nothing matches).
ToolCallFormat DetectToolCallFormat(std::string_view jinja_source);
std::string_view ToolCallFormatName(ToolCallFormat format);

class JinjaTemplate;

class ChatTemplate {
 public:
  // Recognises `jinja_source` (empty: no template) as a built-in family by signature.
  // Unknown templates give kPlain. Used for the tool-call family of Jinja templates too.
  static ChatTemplate Detect(std::string_view jinja_source);
  explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}

  // The model's own template, rendered by the Jinja interpreter. Whether the template
  // wants tool-call arguments as objects (most) or as JSON strings (Firefunction) is
  // found by rendering a probe conversation both ways.
  // Errors: InvalidArgument "chat template line N: ..." when it does not parse.
  [[nodiscard]] static Result<ChatTemplate> FromJinja(std::string_view source, ChatTemplateTokens tokens);

  ChatTemplateKind kind() const { return kind_; }
  ToolCallFormat tool_format() const { return tool_format_; }
  bool is_jinja() const { return jinja_ != nullptr; }
  const ChatTemplateTokens& tokens() const { return tokens_; }
  // "jinja" for a model's own template, else the built-in family: "plain", "chatml" or
  // "llama3".
  std::string_view name() const;

  // Renders `messages` followed (when `add_generation_prompt`) by the assistant
  // generation prompt. A Jinja template gets the context transformers gives it:
  // messages (each message's and tool's `json` when set: the client's own, nothing
  // added or dropped; else built in the OpenAI shape; tool-call arguments as objects or
  // strings, see FromJinja), tools (omitted when none), add_generation_prompt, bos_token, eos_token, plus
  // `functions` (the tools as JSON text) and `datetime` that Firefunction's template
  // reads; its text may start with the BOS text. Built-in renderers give no BOS (the
  // tokenizer adds it when the vocabulary asks for it). Control tokens in the text (e.g. "<|im_start|>") must be
  // tokenized with parse_special.
  // With `tools`: ChatML (Qwen) lists them in the system message inside <tools></tools>
  // and asks for <tool_call>{"name": ..., "arguments": {...}}</tool_call>; Llama 3 puts
  // them in the first user message and asks for {"name": ..., "parameters": {...}}; the
  // plain fallback asks for <tool_call> like ChatML. Assistant tool calls and "tool"
  // results are rendered in the same family forms (Llama 3: role ipython).
  // Errors: InvalidArgument for no messages or a role other than system, user,
  // assistant or tool; for a Jinja template, InvalidArgument "chat template line N: ..."
  // when it raises (e.g. a role order the model does not accept).
  [[nodiscard]] Result<std::string> Render(std::span<const ChatMessage> messages,
                                           std::span<const ChatTool> tools = {},
                                           bool add_generation_prompt = true) const;

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
  [[nodiscard]] Result<std::string> RenderBuiltIn(std::span<const ChatMessage> messages,
                                                  std::span<const ChatTool> tools,
                                                  bool add_generation_prompt) const;
  [[nodiscard]] Result<std::string> RenderJinja(std::span<const ChatMessage> messages,
                                                std::span<const ChatTool> tools,
                                                bool add_generation_prompt) const;

  ChatTemplateKind kind_;
  ToolCallFormat tool_format_ = kind_ == ChatTemplateKind::kLlama3 ? ToolCallFormat::kLlama3Json
                                                                   : ToolCallFormat::kHermes;
  std::shared_ptr<const JinjaTemplate> jinja_;  // null: a built-in renderer
  ChatTemplateTokens tokens_;
  bool string_arguments_ = false;  // the template wants tool-call arguments as JSON text
};

}  // namespace sinew::model
