// GenerationRequest: one validated generation, whichever API (OpenAI HTTP or gRPC) it
// came from, and the chunks a generation produces.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sinew/model/chat_template.h"
#include "sinew/model/sampling.h"

namespace sinew::model {

enum class ToolChoice {
  kAuto,      // the model decides; tool calls in its output are parsed
  kNone,      // tools are not offered
  kRequired,  // the output is exactly one call of one of the tools (constrained)
  kNamed,     // the output is exactly one call of tool_choice_name (constrained)
};

struct ToolSpec {
  std::string name;
  std::string description;
  boost::json::value parameters;  // JSON schema of the arguments (an object schema)
  boost::json::object json = {};   // the tool as the client sent it (what a template gets)
};

struct GenerationRequest {
  bool chat = false;                   // messages (chat template) instead of prompt
  std::string prompt;                  // completions
  std::vector<int32_t> prompt_tokens;  // completions given as token ids (used as is, no BOS)
  std::vector<ChatMessage> messages;   // chat
  bool add_generation_prompt = true;   // chat: end the prompt with the assistant's turn
  SamplingParams sampling;             // max_tokens, logprobs (top alternatives) included
  bool max_tokens_given = false;       // false: max_tokens may shrink to fit the context
  std::vector<std::string> stop;       // text-level stop strings
  bool want_logprobs = false;          // report per-token log-probabilities
  std::vector<ToolSpec> tools;         // chat: functions the model may call
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;        // kNamed
  std::optional<boost::json::value> response_schema;  // response_format json_schema
};

// One parsed tool call of the output.
struct ToolCallOut {
  std::string name;
  std::string arguments;  // compact JSON object text
};

// A piece of generated text with the tokens generated since the previous piece.
struct TextChunk {
  std::string text;                    // complete UTF-8 characters only
  std::vector<GeneratedToken> tokens;  // may be non-empty with empty text (held back)
};

struct GenerationOutcome {
  // "stop", "length" or "tool_calls" (or "cancelled": the sink gave up)
  std::string finish_reason;
  // The request's own stop string (GenerationRequest::stop) that ended the text; "" when
  // none did (a template's stop string or an end-of-generation token ends it as "stop").
  std::string stop_sequence;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double prompt_ms = 0;
  double generation_ms = 0;
};

}  // namespace sinew::model
