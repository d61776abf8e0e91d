// Tool calls: the JSON schema that constrains a forced call, the parser that turns
// generated text into OpenAI tool_calls, and the filter that keeps tool-call text out
// of streamed content.
//
// Families (sinew/model/chat_template.h): ChatML and plain write
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, possibly several, with
// text around them; Llama 3 writes one bare {"name": ..., "parameters": {...}}.
// A forced call (tool_choice required or named) has its opening tag in the prompt, so
// the output is the call object alone, generated under ToolCallSchema().
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
};

// `forced`: the whole text is one call object (its opening tag was in the prompt).
ParsedToolOutput ParseToolCalls(std::string_view text, const ChatTemplate& chat_template,
                                bool forced);

class ToolCallStreamFilter {
 public:
  ToolCallStreamFilter(const ChatTemplate& chat_template, bool forced)
      : template_(chat_template), forced_(forced) {}
  // Content text that may be streamed now (text that may start a call is held).
  std::string Push(std::string_view text);
  // At the end: the parse of everything, and the held text to stream as content
  // when it held no call.
  ParsedToolOutput Finish(std::string* held_content);

 private:
  const ChatTemplate& template_;
  const bool forced_;
  std::string all_;
  size_t emitted_ = 0;     // bytes of all_ already streamed as content
  bool in_call_ = false;   // a call started: hold everything from here
};

}  // namespace sinew::model
