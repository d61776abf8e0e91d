// Parsing and validation of Anthropic Messages API request bodies (POST /v1/messages and
// /v1/messages/count_tokens) into the same GenerationRequest the OpenAI chat path builds,
// so both APIs share one template, tool-call and generation path. Pure; thread-safe.
//
// Translation (docs/model-server.md, "Messages API"):
//   system (a string or text blocks)       -> a first "system" message
//   user text blocks                       -> one "user" message, texts joined
//   user tool_result blocks                -> one "tool" message each (tool_call_id, the
//                                             result's text; is_error: "Error: " before it),
//                                             before the user's text
//   assistant text / tool_use blocks       -> one "assistant" message with tool_calls
//   assistant thinking blocks              -> dropped (not shown to the template)
//   tools [{name, description, input_schema}] -> function tools
//   tool_choice auto | any | tool{name} | none -> kAuto | kRequired | kNamed | kNone
//   max_tokens, stop_sequences, temperature, top_p, top_k -> sampling and stop strings
// max_tokens is a cap: when the prompt leaves less room in the context, the answer ends
// there with stop_reason "max_tokens".
#pragma once

#include <boost/json.hpp>
#include <string>

#include "generation_request.h"
#include "sinew/status.h"

namespace sinew::model {

struct AnthropicRequest {
  GenerationRequest generation;
  bool stream = false;
};

struct AnthropicParseLimits {
  std::string model_id;  // requests naming another model are NotFound
  int32_t max_stop_sequences = 16;
  // count_tokens: max_tokens is not required (and not read).
  bool count_only = false;
};

// Errors: InvalidArgument naming the field (missing model, max_tokens or messages, a role
// other than user/assistant, a malformed block, a tool_use outside an assistant message,
// a tool_result whose tool_use_id is not a tool_use of the message before, a tool_choice
// naming no tool, values out of range); NotFound for another model; Unimplemented for
// valid Messages API input this server does not support (image and document blocks,
// server tools, a last assistant message to continue).
[[nodiscard]] Result<AnthropicRequest> ParseAnthropicRequest(const boost::json::value& body,
                                                             const AnthropicParseLimits& limits);

}  // namespace sinew::model
