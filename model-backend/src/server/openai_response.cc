#include "openai_response.h"

#include "sinew/utf8.h"

namespace sinew::model {
namespace json = boost::json;
namespace {

std::string Event(const json::value& value) { return "data: " + json::serialize(value) + "\n\n"; }

json::array Bytes(std::string_view piece) {
  json::array bytes;
  for (char byte : piece) bytes.emplace_back(static_cast<int>(static_cast<uint8_t>(byte)));
  return bytes;
}

}  // namespace

std::string ErrorBody(std::string_view message, std::string_view type, std::string_view code) {
  json::object error;
  error["message"] = SanitizeUtf8(message);
  error["type"] = type;
  error["code"] = code;
  json::object body;
  body["error"] = std::move(error);
  return json::serialize(body);
}

OpenAiResponder::OpenAiResponder(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                 std::string model_id, std::string id, int64_t created)
    : request_(request),
      tokenizer_(tokenizer),
      model_id_(std::move(model_id)),
      id_(std::move(id)),
      created_(created) {
  if (request_.generation.chat) reasoning_ = std::make_unique<ReasoningSplitter>(false);
}

void OpenAiResponder::SetReasoningOpenedByPrompt(bool opened_by_prompt) {
  reasoning_opened_ = opened_by_prompt;
  if (request_.generation.chat) reasoning_ = std::make_unique<ReasoningSplitter>(opened_by_prompt);
}

std::string OpenAiResponder::DeltaEvent(const std::string& reasoning, const std::string& content,
                                        const std::vector<GeneratedToken>* tokens) {
  json::object delta;
  if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
  if (!content.empty() || reasoning.empty()) delta["content"] = content;
  json::object choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = tokens ? Logprobs(*tokens, 0) : json::value(nullptr);
  choice["finish_reason"] = nullptr;
  json::object out = Envelope(true);
  out["choices"] = json::array{std::move(choice)};
  return Event(out);
}

json::object OpenAiResponder::Envelope(bool chunk) const {
  json::object out;
  out["id"] = id_;
  if (request_.generation.chat) {
    out["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    out["object"] = "text_completion";
  }
  out["created"] = created_;
  out["model"] = model_id_;
  return out;
}

json::object OpenAiResponder::Usage(const GenerationOutcome& outcome) {
  json::object usage;
  usage["prompt_tokens"] = outcome.prompt_tokens;
  usage["completion_tokens"] = outcome.completion_tokens;
  usage["total_tokens"] = outcome.prompt_tokens + outcome.completion_tokens;
  return usage;
}

json::value OpenAiResponder::Logprobs(const std::vector<GeneratedToken>& tokens,
                                      size_t text_offset) const {
  if (!request_.generation.want_logprobs) return nullptr;
  if (request_.generation.chat) {
    json::array content;
    for (const GeneratedToken& token : tokens) {
      std::string piece = tokenizer_.TokenPiece(token.id);
      json::object entry;
      entry["token"] = SanitizeUtf8(piece);
      entry["logprob"] = token.logprob;
      entry["bytes"] = Bytes(piece);
      json::array top;
      for (const TokenLogprob& alternative : token.top_logprobs) {
        std::string alt_piece = tokenizer_.TokenPiece(alternative.id);
        json::object item;
        item["token"] = SanitizeUtf8(alt_piece);
        item["logprob"] = alternative.logprob;
        item["bytes"] = Bytes(alt_piece);
        top.push_back(std::move(item));
      }
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    json::object out;
    out["content"] = std::move(content);
    return out;
  }
  json::array token_strings, token_logprobs, top_logprobs, offsets;
  for (const GeneratedToken& token : tokens) {
    std::string piece = tokenizer_.TokenPiece(token.id);
    token_strings.emplace_back(SanitizeUtf8(piece));
    token_logprobs.emplace_back(token.logprob);
    json::object top;
    for (const TokenLogprob& alternative : token.top_logprobs) {
      top[SanitizeUtf8(tokenizer_.TokenPiece(alternative.id))] = alternative.logprob;
    }
    top_logprobs.push_back(std::move(top));
    offsets.emplace_back(text_offset);
    text_offset += piece.size();
  }
  json::object out;
  out["tokens"] = std::move(token_strings);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top_logprobs);
  out["text_offset"] = std::move(offsets);
  return out;
}

std::string OpenAiResponder::StreamStart() {
  if (!request_.generation.chat) return {};
  json::object delta;
  delta["role"] = "assistant";
  delta["content"] = "";
  json::object choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  json::object out = Envelope(true);
  out["choices"] = json::array{std::move(choice)};
  return Event(out);
}

void OpenAiResponder::EnableTools(const ChatTemplate& chat_template, bool forced) {
  tools_enabled_ = true;
  tool_format_ = chat_template.tool_format();
  if (forced) tool_frame_ = PlanForcedToolCall(request_.generation, tool_format_).frame;
  tool_filter_ = std::make_unique<ToolCallStreamFilter>(
      tool_format_, tool_frame_ ? &*tool_frame_ : nullptr);
}

std::string OpenAiResponder::ToolCallDeltaEvent(const std::vector<ToolCallDelta>& deltas) const {
  if (deltas.empty()) return {};
  json::array calls;
  for (const ToolCallDelta& d : deltas) {
    json::object call;
    call["index"] = d.index;
    json::object fn;
    if (d.first) {
      call["id"] = "call_" + id_ + "_" + std::to_string(d.index);
      call["type"] = "function";
      fn["name"] = d.name;
    }
    fn["arguments"] = d.arguments;
    call["function"] = std::move(fn);
    calls.push_back(std::move(call));
  }
  json::object choice;
  choice["index"] = 0;
  choice["delta"] = json::object{{"tool_calls", std::move(calls)}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  json::object out = Envelope(true);
  out["choices"] = json::array{std::move(choice)};
  return Event(out);
}

json::array OpenAiResponder::ToolCallsJson(const std::vector<ToolCallOut>& calls) const {
  json::array out;
  for (size_t i = 0; i < calls.size(); ++i) {
    json::object call;
    call["id"] = "call_" + id_ + "_" + std::to_string(i);
    call["type"] = "function";
    call["function"] = json::object{{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

std::string OpenAiResponder::StreamChunk(const TextChunk& chunk) {
  if (!request_.generation.chat) {
    if (chunk.text.empty() && !request_.generation.want_logprobs) return {};
    json::object choice;
    choice["index"] = 0;
    choice["text"] = chunk.text;
    choice["logprobs"] = Logprobs(chunk.tokens, 0);
    choice["finish_reason"] = nullptr;
    json::object out = Envelope(true);
    out["choices"] = json::array{std::move(choice)};
    return Event(out);
  }
  ReasoningSplitter::Parts parts = reasoning_->Push(chunk.text);
  std::vector<ToolCallDelta> deltas;
  if (tool_filter_) parts.content = tool_filter_->Push(parts.content, &deltas);
  std::string events;
  if (!parts.content.empty() || !parts.reasoning.empty() || request_.generation.want_logprobs) {
    events = DeltaEvent(parts.reasoning, parts.content, &chunk.tokens);
  }
  return events + ToolCallDeltaEvent(deltas);
}

std::string OpenAiResponder::StreamEnd(const GenerationOutcome& outcome) {
  std::string events;
  std::string finish_reason = outcome.finish_reason;
  if (reasoning_) {
    ReasoningSplitter::Parts tail = reasoning_->Finish();
    std::vector<ToolCallDelta> deltas;
    if (tool_filter_) tail.content = tool_filter_->Push(tail.content, &deltas);
    if (!tail.reasoning.empty() || !tail.content.empty()) events += DeltaEvent(tail.reasoning, tail.content, nullptr);
    events += ToolCallDeltaEvent(deltas);
  }
  if (tool_filter_) {
    std::string held;
    std::vector<ToolCallDelta> deltas;
    ParsedToolOutput parsed = tool_filter_->Finish(&held, &deltas);
    json::object delta;
    if (!parsed.reasoning.empty()) delta["reasoning_content"] = parsed.reasoning;
    if (!held.empty()) delta["content"] = held;
    if (!delta.empty()) {
      json::object choice;
      choice["index"] = 0;
      choice["delta"] = std::move(delta);
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = nullptr;
      json::object out = Envelope(true);
      out["choices"] = json::array{std::move(choice)};
      events += Event(out);
    }
    events += ToolCallDeltaEvent(deltas);
    if (!parsed.calls.empty() && finish_reason == "stop") finish_reason = "tool_calls";
  }
  json::object choice;
  choice["index"] = 0;
  if (request_.generation.chat) {
    choice["delta"] = json::object{};
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  json::object out = Envelope(true);
  out["choices"] = json::array{std::move(choice)};
  events += Event(out);
  if (request_.include_usage) {
    json::object usage_chunk = Envelope(true);
    usage_chunk["choices"] = json::array{};
    usage_chunk["usage"] = Usage(outcome);
    events += Event(usage_chunk);
  }
  events += "data: [DONE]\n\n";
  return events;
}

void OpenAiResponder::Accumulate(const TextChunk& chunk) {
  text_ += chunk.text;
  tokens_.insert(tokens_.end(), chunk.tokens.begin(), chunk.tokens.end());
}

std::string OpenAiResponder::Body(const GenerationOutcome& outcome) const {
  json::object choice;
  choice["index"] = 0;
  if (request_.generation.chat) {
    json::object message;
    message["role"] = "assistant";
    const ReasoningSplitter::Parts split = SplitReasoning(text_, reasoning_opened_);
    message["content"] = split.content;
    if (!split.reasoning.empty()) message["reasoning_content"] = split.reasoning;
    std::string finish_reason = outcome.finish_reason;
    if (tools_enabled_) {
      ParsedToolOutput parsed =
          ParseToolCalls(split.content, tool_format_, tool_frame_ ? &*tool_frame_ : nullptr);
      if (!parsed.reasoning.empty()) message["reasoning_content"] = parsed.reasoning;
      if (!parsed.calls.empty()) {
        message["content"] = parsed.content.empty() ? json::value(nullptr)
                                                    : json::value(parsed.content);
        message["tool_calls"] = ToolCallsJson(parsed.calls);
        if (finish_reason == "stop") finish_reason = "tool_calls";
      }
    }
    choice["message"] = std::move(message);
    choice["finish_reason"] = finish_reason;
  } else {
    choice["text"] = text_;
    choice["finish_reason"] = outcome.finish_reason;
  }
  choice["logprobs"] = Logprobs(tokens_, 0);
  json::object out = Envelope(false);
  out["choices"] = json::array{std::move(choice)};
  out["usage"] = Usage(outcome);
  return json::serialize(out);
}

}  // namespace sinew::model
