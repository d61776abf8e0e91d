#include "anthropic_response.h"

#include "sinew/utf8.h"

namespace sinew::model {
namespace json = boost::json;
namespace {

constexpr std::string_view kSpace = " \t\r\n";

// `event: <type>\ndata: {"type": <type>, ...fields}\n\n`
std::string Event(std::string_view type, json::object fields) {
  json::object data;
  data["type"] = type;
  for (auto& field : fields) data[field.key()] = std::move(field.value());
  return "event: " + std::string(type) + "\ndata: " + json::serialize(data) + "\n\n";
}

json::object ErrorObject(std::string_view type, std::string_view message) {
  return json::object{{"type", "error"},
                      {"error", json::object{{"type", type}, {"message", SanitizeUtf8(message)}}}};
}

// A call's arguments text as the input object ({} if it is not one).
json::value InputOf(const std::string& arguments) {
  boost::system::error_code ec;
  json::value input = json::parse(arguments, ec);
  if (ec || !input.is_object()) return json::object{};
  return input;
}

}  // namespace

std::string AnthropicErrorBody(std::string_view type, std::string_view message) {
  return json::serialize(ErrorObject(type, message));
}

std::string AnthropicErrorEvent(std::string_view type, std::string_view message) {
  return "event: error\ndata: " + AnthropicErrorBody(type, message) + "\n\n";
}

AnthropicError AnthropicErrorFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
      return {400, "invalid_request_error"};
    case StatusCode::kNotFound:
      return {404, "not_found_error"};
    case StatusCode::kResourceExhausted:
      return {529, "overloaded_error"};
    default:
      return {500, "api_error"};
  }
}

AnthropicResponder::AnthropicResponder(const AnthropicRequest& request, std::string model_id,
                                       std::string id, int32_t input_tokens)
    : request_(request),
      model_id_(std::move(model_id)),
      id_(std::move(id)),
      input_tokens_(input_tokens) {}

void AnthropicResponder::EnableTools(const ChatTemplate& chat_template, bool forced) {
  tools_enabled_ = true;
  tool_format_ = chat_template.tool_format();
  if (forced) tool_frame_ = PlanForcedToolCall(request_.generation, tool_format_).frame;
  tool_filter_ =
      std::make_unique<ToolCallStreamFilter>(tool_format_, tool_frame_ ? &*tool_frame_ : nullptr);
}

void AnthropicResponder::SetReasoningOpenedByPrompt(bool opened_by_prompt) {
  reasoning_opened_ = opened_by_prompt;
  reasoning_ = ReasoningSplitter(opened_by_prompt);
}

std::string AnthropicResponder::ToolUseId(size_t index) const {
  std::string_view base = id_;
  if (base.starts_with("msg_")) base.remove_prefix(4);
  return "toolu_" + std::string(base) + "_" + std::to_string(index);
}

std::string AnthropicResponder::StopReason(const GenerationOutcome& outcome, bool has_calls) {
  if (outcome.finish_reason == "length") return "max_tokens";
  if (has_calls) return "tool_use";
  if (!outcome.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

std::string AnthropicResponder::StreamStart() {
  json::object message;
  message["id"] = id_;
  message["type"] = "message";
  message["role"] = "assistant";
  message["model"] = model_id_;
  message["content"] = json::array{};
  message["stop_reason"] = nullptr;
  message["stop_sequence"] = nullptr;
  message["usage"] = json::object{{"input_tokens", input_tokens_}, {"output_tokens", 0}};
  return Event("message_start", json::object{{"message", std::move(message)}});
}

std::string AnthropicResponder::Close() {
  if (open_ == Block::kNone) return {};
  if (open_ == Block::kThinking) thinking_space_.clear();
  std::string event = Event("content_block_stop", json::object{{"index", open_index_}});
  open_ = Block::kNone;
  open_index_ = -1;
  return event;
}

std::string AnthropicResponder::Open(Block kind, json::object content_block) {
  std::string events = Close();
  open_ = kind;
  open_index_ = next_index_++;
  events += Event("content_block_start", json::object{{"index", open_index_},
                                                      {"content_block", std::move(content_block)}});
  return events;
}

std::string AnthropicResponder::TextEvents(const std::string& reasoning,
                                           const std::string& content) {
  std::string events;
  std::string thinking = thinking_space_ + reasoning;
  thinking_space_.clear();
  if (!thinking_begun_) thinking.erase(0, thinking.find_first_not_of(kSpace));
  const size_t last = thinking.find_last_not_of(kSpace);
  thinking_space_ = thinking.substr(last == std::string::npos ? 0 : last + 1);
  thinking.resize(thinking.size() - thinking_space_.size());
  if (!thinking.empty()) {
    thinking_begun_ = true;
    if (open_ != Block::kThinking) {
      events += Open(Block::kThinking,
                     json::object{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    }
    events += Event(
        "content_block_delta",
        json::object{{"index", open_index_},
                     {"delta", json::object{{"type", "thinking_delta"}, {"thinking", thinking}}}});
  }
  if (!content.empty()) {
    if (open_ != Block::kText)
      events += Open(Block::kText, json::object{{"type", "text"}, {"text", ""}});
    events +=
        Event("content_block_delta",
              json::object{{"index", open_index_},
                           {"delta", json::object{{"type", "text_delta"}, {"text", content}}}});
  }
  return events;
}

std::string AnthropicResponder::ToolEvents(const std::vector<ToolCallDelta>& deltas) {
  std::string events;
  for (const ToolCallDelta& d : deltas) {
    if (d.first) {
      streamed_calls_ = true;
      events += Open(Block::kToolUse, json::object{{"type", "tool_use"},
                                                   {"id", ToolUseId(d.index)},
                                                   {"name", d.name},
                                                   {"input", json::object{}}});
      if (call_blocks_.size() <= d.index) call_blocks_.resize(d.index + 1, -1);
      call_blocks_[d.index] = open_index_;
    }
    if (d.arguments.empty() || d.index >= call_blocks_.size() || call_blocks_[d.index] < 0)
      continue;
    events += Event("content_block_delta",
                    json::object{{"index", call_blocks_[d.index]},
                                 {"delta", json::object{{"type", "input_json_delta"},
                                                        {"partial_json", d.arguments}}}});
  }
  return events;
}

std::string AnthropicResponder::StreamChunk(const TextChunk& chunk) {
  ReasoningSplitter::Parts parts = reasoning_.Push(chunk.text);
  std::vector<ToolCallDelta> deltas;
  if (tool_filter_) parts.content = tool_filter_->Push(parts.content, &deltas);
  return TextEvents(parts.reasoning, parts.content) + ToolEvents(deltas);
}

std::string AnthropicResponder::StreamEnd(const GenerationOutcome& outcome) {
  ReasoningSplitter::Parts tail = reasoning_.Finish();
  std::vector<ToolCallDelta> deltas;
  if (tool_filter_) tail.content = tool_filter_->Push(tail.content, &deltas);
  std::string events = TextEvents(tail.reasoning, tail.content) + ToolEvents(deltas);
  bool has_calls = false;
  if (tool_filter_) {
    std::string held;
    deltas.clear();
    ParsedToolOutput parsed = tool_filter_->Finish(&held, &deltas);
    events += TextEvents(parsed.reasoning, held) + ToolEvents(deltas);
    has_calls = !parsed.calls.empty();
  }
  events += Close();
  const std::string stop_reason = StopReason(outcome, has_calls);
  json::object delta;
  delta["stop_reason"] = stop_reason;
  delta["stop_sequence"] =
      stop_reason == "stop_sequence" ? json::value(outcome.stop_sequence) : json::value(nullptr);
  events +=
      Event("message_delta",
            json::object{{"delta", std::move(delta)},
                         {"usage", json::object{{"input_tokens", outcome.prompt_tokens},
                                                {"output_tokens", outcome.completion_tokens}}}});
  events += Event("message_stop", json::object{});
  return events;
}

void AnthropicResponder::Accumulate(const TextChunk& chunk) { text_ += chunk.text; }

std::string AnthropicResponder::Body(const GenerationOutcome& outcome) const {
  const ReasoningSplitter::Parts split = SplitReasoning(text_, reasoning_opened_);
  std::string reasoning = split.reasoning;
  std::string content = split.content;
  std::vector<ToolCallOut> calls;
  if (tools_enabled_) {
    ParsedToolOutput parsed =
        ParseToolCalls(split.content, tool_format_, tool_frame_ ? &*tool_frame_ : nullptr);
    if (!parsed.reasoning.empty()) reasoning += parsed.reasoning;
    if (!parsed.calls.empty()) {
      content = parsed.content;
      calls = std::move(parsed.calls);
    }
  }
  json::array blocks;
  if (!reasoning.empty()) {
    blocks.push_back(
        json::object{{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}});
  }
  if (!content.empty()) blocks.push_back(json::object{{"type", "text"}, {"text", content}});
  for (size_t i = 0; i < calls.size(); ++i) {
    blocks.push_back(json::object{{"type", "tool_use"},
                                  {"id", ToolUseId(i)},
                                  {"name", calls[i].name},
                                  {"input", InputOf(calls[i].arguments)}});
  }
  const std::string stop_reason = StopReason(outcome, !calls.empty());
  json::object out;
  out["id"] = id_;
  out["type"] = "message";
  out["role"] = "assistant";
  out["model"] = model_id_;
  out["content"] = std::move(blocks);
  out["stop_reason"] = stop_reason;
  out["stop_sequence"] =
      stop_reason == "stop_sequence" ? json::value(outcome.stop_sequence) : json::value(nullptr);
  out["usage"] = json::object{{"input_tokens", outcome.prompt_tokens},
                              {"output_tokens", outcome.completion_tokens}};
  return json::serialize(out);
}

}  // namespace sinew::model
