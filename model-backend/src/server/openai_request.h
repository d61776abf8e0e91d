// Parsing and validation of OpenAI-style /v1/completions and /v1/chat/completions
// request bodies into a GenerationRequest. Pure functions; thread-safe.
#pragma once

#include <boost/json.hpp>
#include <string>

#include "generation_request.h"
#include "sinew/status.h"

namespace sinew::model {

struct OpenAiRequest {
  GenerationRequest generation;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t top_logprobs = 0;
};

struct ParseLimits {
  std::string model_id;  // requests naming another model are rejected
  int32_t max_stop_strings = 4;
  int32_t max_top_logprobs = 20;
  // Default max_tokens when absent (completions; chat defaults to the context).
  int32_t default_max_tokens = 16;
};

// Errors: InvalidArgument naming the field (wrong type, out of range, missing prompt or
// messages), NotFound for an unknown model, Unimplemented for a valid OpenAI parameter
// this server does not support (n > 1, frequency/presence penalties, tools, ...).
[[nodiscard]] Result<OpenAiRequest> ParseOpenAiRequest(const boost::json::value& body, bool chat,
                                                       const ParseLimits& limits);

}  // namespace sinew::model
