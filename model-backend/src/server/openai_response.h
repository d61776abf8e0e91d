// Builds OpenAI-style response bodies and SSE events for one request: the non-streaming
// JSON body, or the `data: {...}\n\n` chunks of a stream ending with `data: [DONE]`.
//
// Thread-safety: none; one per request, used by the thread that runs the generation.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "generation_request.h"
#include "openai_request.h"
#include "sinew/model/tokenizer.h"

namespace sinew::model {

// {"error":{"message":..,"type":..,"code":..}}
std::string ErrorBody(std::string_view message, std::string_view type, std::string_view code);

class OpenAiResponder {
 public:
  // REQUIRES: `tokenizer` outlives this object.
  OpenAiResponder(const OpenAiRequest& request, const Tokenizer& tokenizer, std::string model_id,
                  std::string id, int64_t created);

  // Streaming: the first event (chat: the assistant role delta; completions: "").
  std::string StreamStart() const;
  // One event for `chunk`, or "" when it carries nothing to send.
  std::string StreamChunk(const TextChunk& chunk) const;
  // The final chunk (finish_reason), the usage chunk if asked for, and `data: [DONE]`.
  std::string StreamEnd(const GenerationOutcome& outcome) const;

  // Non-streaming: collect every chunk, then build the body.
  void Accumulate(const TextChunk& chunk);
  std::string Body(const GenerationOutcome& outcome) const;

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
};

}  // namespace sinew::model
