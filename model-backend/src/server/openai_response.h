// Builds OpenAI-style response bodies and SSE events for one request: the non-streaming
// JSON body, or the `data: {...}\n\n` chunks of a stream ending with `data: [DONE]`.
//
// Thread-safety: none; one per request, used by the thread that runs the generation.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "generation_request.h"
#include "generation_responder.h"
#include "openai_request.h"
#include "forced_tool_call.h"
#include "tool_call_parser.h"
#include "tool_call_stream.h"
#include "sinew/model/tokenizer.h"
#include "sinew/reasoning_splitter.h"

namespace sinew::model {

// {"error":{"message":..,"type":..,"code":..}}
std::string ErrorBody(std::string_view message, std::string_view type, std::string_view code);

class OpenAiResponder : public GenerationResponder {
 public:
  // REQUIRES: `tokenizer` outlives this object.
  OpenAiResponder(const OpenAiRequest& request, const Tokenizer& tokenizer, std::string model_id,
                  std::string id, int64_t created);

  // Streaming: the first event (chat: the assistant role delta; completions: "").
  std::string StreamStart() override;
  // One event for `chunk`, or "" when it carries nothing to send.
  std::string StreamChunk(const TextChunk& chunk) override;
  // The final chunk (finish_reason), the usage chunk if asked for, and `data: [DONE]`.
  // With tools: a delta with the parsed tool_calls first (finish_reason "tool_calls").
  std::string StreamEnd(const GenerationOutcome& outcome) override;

  // Chat with tools offered: tool calls in the output become `tool_calls` (text that
  // may start a call is not streamed as content; a streamed call is announced with its
  // name once that is complete, then its arguments follow as tool_calls deltas as they
  // are generated). `forced`: the output is one call after the family's opening text
  // (PlanForcedToolCall of the request).
  void EnableTools(const ChatTemplate& chat_template, bool forced) override;

  // Chat: reasoning (<think>...</think>) goes to `reasoning_content`, never to content;
  // `opened_by_prompt`: the prompt ended with "<think>" so the output starts inside it.
  void SetReasoningOpenedByPrompt(bool opened_by_prompt) override;

  // Non-streaming: collect every chunk, then build the body.
  void Accumulate(const TextChunk& chunk) override;
  std::string Body(const GenerationOutcome& outcome) const override;

 private:
  boost::json::object Envelope(bool chunk) const;
  boost::json::value Logprobs(const std::vector<GeneratedToken>& tokens, size_t text_offset) const;
  static boost::json::object Usage(const GenerationOutcome& outcome);

  const OpenAiRequest& request_;
  const Tokenizer& tokenizer_;
  std::string model_id_;
  std::string id_;
  int64_t created_;
  // Non-streaming accumulation.
  std::string text_;
  std::vector<GeneratedToken> tokens_;
  // Tools: set by EnableTools.
  bool tools_enabled_ = false;
  ToolCallFormat tool_format_ = ToolCallFormat::kHermes;
  std::optional<ToolCallFrame> tool_frame_;  // forced
  std::unique_ptr<ToolCallStreamFilter> tool_filter_;
  bool reasoning_opened_ = false;
  std::unique_ptr<ReasoningSplitter> reasoning_;  // chat only
  std::string DeltaEvent(const std::string& reasoning, const std::string& content,
                         const std::vector<GeneratedToken>* tokens);
  // One event with these tool_calls deltas ("" when there are none).
  std::string ToolCallDeltaEvent(const std::vector<ToolCallDelta>& deltas) const;
  boost::json::array ToolCallsJson(const std::vector<ToolCallOut>& calls) const;
};

}  // namespace sinew::model
