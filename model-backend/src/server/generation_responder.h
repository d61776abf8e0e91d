// GenerationResponder: how one API (OpenAI chat/completions, Anthropic Messages) writes
// a generation back, so that the API handler runs every API's generations through one
// path (parse -> GenerationRequest -> ModelRunner::Run -> responder).
//
// Thread-safety: none; one per request, used by the thread that runs the generation.
#pragma once

#include <string>

#include "generation_request.h"
#include "sinew/model/chat_template.h"

namespace sinew::model {

class GenerationResponder {
 public:
  virtual ~GenerationResponder() = default;

  // Before the generation: tools are offered (`forced`: the output is one call after
  // the family's opening text), and whether the prompt opened the model's reasoning.
  virtual void EnableTools(const ChatTemplate& chat_template, bool forced) = 0;
  virtual void SetReasoningOpenedByPrompt(bool opened_by_prompt) = 0;

  // Streaming: the events before the first chunk's, those of one chunk ("" when it
  // carries nothing to send), and the closing ones.
  virtual std::string StreamStart() = 0;
  virtual std::string StreamChunk(const TextChunk& chunk) = 0;
  virtual std::string StreamEnd(const GenerationOutcome& outcome) = 0;

  // Non-streaming: collect every chunk, then build the JSON body.
  virtual void Accumulate(const TextChunk& chunk) = 0;
  virtual std::string Body(const GenerationOutcome& outcome) const = 0;
};

}  // namespace sinew::model
