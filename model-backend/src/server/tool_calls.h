// Tool calls: the JSON schema that constrains a forced call, the parser that turns
// generated text into OpenAI tool_calls, and the filter that keeps tool-call text out
// of streamed content.
//
// Families (ToolCallFormat in sinew/model/chat_template.h): Hermes/Qwen <tool_call>,
// Llama 3.x bare JSON or <|python_tag|>, Mistral [TOOL_CALLS], Functionary v3.1
// <function=..> and v3.2 >>>name, Firefunction functools[..], Command R7B
// <|START_ACTION|>, DeepSeek R1 <｜tool▁calls▁begin｜>. Text outside the calls is content.
// A forced call (tool_choice required or named) has its opening text in the prompt, so
// the output is the call object alone, generated under ToolCallSchema().
//
// Reasoning: <think>...</think> at the start of the output (or after a prompt that
// ends with <think>) is split off as reasoning_content by ReasoningSplitter.
//
// Thread-safety: free functions are pure; a ToolCallStreamFilter is used by one thread.
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "generation_request.h"
#include "sinew/model/chat_template.h"

namespace sinew::model {

// {"type":"object","properties":{"name":{"const":N},KEY:<parameters>},"required":[..]}
// for the named tool, or an anyOf of one such object per tool (required).
boost::json::value ToolCallSchema(const GenerationRequest& request, std::string_view arguments_key);

struct ParsedToolOutput {
  std::string content;               // text outside the calls (trimmed)
  std::vector<ToolCallOut> calls;    // empty: no well-formed call found
  std::string reasoning;             // Command R7B's <|START_THINKING|> part
};

// Parses `text` written in `format` (not forced).
ParsedToolOutput ParseToolCallsOf(std::string_view text, ToolCallFormat format);

// `forced`: the whole text is one call object (its opening tag was in the prompt).
ParsedToolOutput ParseToolCalls(std::string_view text, const ChatTemplate& chat_template,
                                bool forced);

class ToolCallStreamFilter {
 public:
  ToolCallStreamFilter(const ChatTemplate& chat_template, bool forced)
      : template_(chat_template), forced_(forced), format_(chat_template.tool_format()) {}
  // Content text that may be streamed now (text that may start a call is held).
  std::string Push(std::string_view text);
  // At the end: the parse of everything, and the held text to stream as content
  // when it held no call.
  ParsedToolOutput Finish(std::string* held_content);

 private:
  const ChatTemplate& template_;
  const bool forced_;
  const ToolCallFormat format_;
  std::string all_;
  size_t emitted_ = 0;     // bytes of all_ already streamed as content
  bool in_call_ = false;   // a call started: hold everything from here
};

// Splits generated text into reasoning (<think>...</think>) and the rest, as it streams.
// Only a <think> at the very start (after whitespace) opens reasoning, or the prompt
// when it ended with "<think>" (`opened_by_prompt`, DeepSeek R1's templates do so).
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool opened_by_prompt)
      : state_(opened_by_prompt ? State::kThinking : State::kStart) {}
  struct Parts {
    std::string reasoning;
    std::string content;
  };
  // The parts of `text` that are final now (a possible tag prefix is held back).
  Parts Push(std::string_view text);
  // Whatever was held back.
  Parts Finish();

 private:
  enum class State { kStart, kThinking, kContent } state_;
  std::string held_;
  bool skip_space_ = false;  // drop the whitespace that follows </think>
};

// Non-streaming: the reasoning (trimmed) and the content of `text`.
ReasoningSplitter::Parts SplitReasoning(std::string_view text, bool opened_by_prompt);

}  // namespace sinew::model
