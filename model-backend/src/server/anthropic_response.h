// Anthropic Messages API responses for one request: the non-streaming message body, or
// the server-sent events of a stream, and Anthropic's error shape.
//
// Content blocks, in order: "thinking" (the model's <think> reasoning; signature ""),
// "text" (when not empty), then one "tool_use" per parsed tool call (id "toolu_...",
// input the parsed arguments object). stop_reason: "max_tokens" when the token limit
// ended it, else "tool_use" when it holds calls, "stop_sequence" (with stop_sequence) when
// one of the request's stop_sequences did, else "end_turn".
//
// A stream is: message_start (usage.input_tokens; output_tokens 0), then per block
// content_block_start, content_block_delta (thinking_delta, text_delta or
// input_json_delta: the arguments text as generated; the pieces concatenate to the
// input's JSON) and content_block_stop, then message_delta (stop_reason, stop_sequence,
// usage) and message_stop. Each event is `event: <type>\ndata: <json>\n\n`.
//
// Thread-safety: none; one per request, used by the thread that runs the generation.
#pragma once

#include <boost/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anthropic_request.h"
#include "forced_tool_call.h"
#include "generation_responder.h"
#include "sinew/reasoning_splitter.h"
#include "sinew/status.h"
#include "tool_call_parser.h"
#include "tool_call_stream.h"

namespace sinew::model {

// {"type":"error","error":{"type":<type>,"message":<message>}}
std::string AnthropicErrorBody(std::string_view type, std::string_view message);
// The same as a stream's `event: error` event.
std::string AnthropicErrorEvent(std::string_view type, std::string_view message);

// The HTTP status and Anthropic error type of a Status: InvalidArgument, OutOfRange and
// Unimplemented 400 invalid_request_error; NotFound 404 not_found_error;
// ResourceExhausted 529 overloaded_error; anything else 500 api_error.
struct AnthropicError {
  int http_status = 400;
  std::string type;
};
AnthropicError AnthropicErrorFor(const Status& status);

class AnthropicResponder : public GenerationResponder {
 public:
  // `id` is the message id ("msg_..."); `input_tokens` the prompt's length in tokens.
  // REQUIRES: `request` outlives this object.
  AnthropicResponder(const AnthropicRequest& request, std::string model_id, std::string id,
                     int32_t input_tokens);

  void EnableTools(const ChatTemplate& chat_template, bool forced) override;
  void SetReasoningOpenedByPrompt(bool opened_by_prompt) override;
  std::string StreamStart() override;
  std::string StreamChunk(const TextChunk& chunk) override;
  std::string StreamEnd(const GenerationOutcome& outcome) override;
  void Accumulate(const TextChunk& chunk) override;
  std::string Body(const GenerationOutcome& outcome) const override;

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  std::string ToolUseId(size_t index) const;
  static std::string StopReason(const GenerationOutcome& outcome, bool has_calls);
  // Stream pieces: reasoning and content text, then tool-call deltas.
  std::string TextEvents(const std::string& reasoning, const std::string& content);
  std::string ToolEvents(const std::vector<ToolCallDelta>& deltas);
  std::string Open(Block kind, boost::json::object content_block);
  std::string Close();

  const AnthropicRequest& request_;
  std::string model_id_;
  std::string id_;
  int32_t input_tokens_;
  std::string text_;  // non-streaming accumulation
  bool reasoning_opened_ = false;
  ReasoningSplitter reasoning_;
  bool tools_enabled_ = false;
  ToolCallFormat tool_format_ = ToolCallFormat::kHermes;
  std::optional<ToolCallFrame> tool_frame_;  // forced
  std::unique_ptr<ToolCallStreamFilter> tool_filter_;
  // Stream state: the open block and its index, the next index, each call's block.
  Block open_ = Block::kNone;
  int64_t open_index_ = -1;
  int64_t next_index_ = 0;
  std::vector<int64_t> call_blocks_;
  // The thinking text streams trimmed as the whole answer's is: leading whitespace is
  // dropped, trailing whitespace held until more reasoning follows it.
  bool thinking_begun_ = false;
  std::string thinking_space_;
  bool streamed_calls_ = false;
};

}  // namespace sinew::model
