// GenerationRequest: one validated generation, whichever API (OpenAI HTTP or gRPC) it
// came from, and the chunks a generation produces.
#pragma once

#include <string>
#include <vector>

#include "sinew/model/chat_template.h"
#include "sinew/model/sampling.h"

namespace sinew::model {

struct GenerationRequest {
  bool chat = false;                   // messages (chat template) instead of prompt
  std::string prompt;                  // completions
  std::vector<int32_t> prompt_tokens;  // completions given as token ids (used as is, no BOS)
  std::vector<ChatMessage> messages;   // chat
  SamplingParams sampling;             // max_tokens, logprobs (top alternatives) included
  bool max_tokens_given = false;       // false: max_tokens may shrink to fit the context
  std::vector<std::string> stop;       // text-level stop strings
  bool want_logprobs = false;          // report per-token log-probabilities
};

// A piece of generated text with the tokens generated since the previous piece.
struct TextChunk {
  std::string text;                    // complete UTF-8 characters only
  std::vector<GeneratedToken> tokens;  // may be non-empty with empty text (held back)
};

struct GenerationOutcome {
  std::string finish_reason;  // "stop" or "length" (or "cancelled": the sink gave up)
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double prompt_ms = 0;
  double generation_ms = 0;
};

}  // namespace sinew::model
