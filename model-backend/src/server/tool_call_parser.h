// The parsers that turn a whole generated text of a tool-call family into OpenAI
// tool_calls and the content around them. The forced call's plan is forced_tool_call.h,
// the stream filter tool_call_stream.h.
//
// Families (ToolCallFormat in sinew/model/chat_template.h): Hermes/Qwen <tool_call>,
// Llama 3.x bare JSON or <|python_tag|>, Mistral [TOOL_CALLS], Functionary v3.1
// <function=..> and v3.2 >>>name, Firefunction functools[..], Command R7B
// <|START_ACTION|>, DeepSeek R1 <｜tool▁calls▁begin｜>. Text outside the calls is content.
//
// Arguments are returned as the model wrote them with the whitespace outside strings
// removed (compact JSON text that parses to the object; not re-serialized), so that the
// streamed pieces, which are cut from the same text as it arrives, concatenate to exactly
// the arguments of the finished parse.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "forced_tool_call.h"
#include "generation_request.h"
#include "sinew/model/chat_template.h"

namespace sinew::model {

struct ParsedToolOutput {
  std::string content;               // text outside the calls (trimmed)
  std::vector<ToolCallOut> calls;    // empty: no well-formed call found
  std::string reasoning;             // Command R7B's <|START_THINKING|> part
};

// Parses `text` written in `format` (not forced).
ParsedToolOutput ParseToolCallsOf(std::string_view text, ToolCallFormat format);

// `forced` (null: not forced): `text` is the output after forced->open.
ParsedToolOutput ParseToolCalls(std::string_view text, ToolCallFormat format,
                                const ToolCallFrame* forced);

}  // namespace sinew::model
