// Tool calls: the plan that constrains a forced call in the family's own syntax, the
// parser that turns generated text into OpenAI tool_calls, and the stream filter that
// keeps tool-call text out of streamed content and streams each call's arguments as
// they are generated.
//
// Families (ToolCallFormat in sinew/model/chat_template.h): Hermes/Qwen <tool_call>,
// Llama 3.x bare JSON or <|python_tag|>, Mistral [TOOL_CALLS], Functionary v3.1
// <function=..> and v3.2 >>>name, Firefunction functools[..], Command R7B
// <|START_ACTION|>, DeepSeek R1 <｜tool▁calls▁begin｜>. Text outside the calls is content.
// A forced call (tool_choice required or named) is written in the family's own syntax:
// its opening text is appended to the prompt (ForcedToolCall::frame.open), the output
// is constrained to one of the alternatives (the tool's name in the family's form, its
// arguments object, the family's text after it), and the output is parsed with the
// family's parser after frame.open + output + frame.close.
//
// Arguments are returned as the model wrote them with the whitespace outside strings
// removed (compact JSON text that parses to the object; not re-serialized), so that the
// streamed pieces, which are cut from the same text as it arrives, concatenate to exactly
// the arguments of the finished parse.
//
// Thread-safety: free functions are pure; a ToolCallStreamFilter is used by one thread.
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "generation_request.h"
#include "sinew/model/chat_template.h"
#include "sinew/model/constraint.h"

namespace sinew::model {

// The text around a forced call's output: `open` ends the prompt, `close` is what the
// family writes after the call (appended to the output before parsing).
struct ToolCallFrame {
  std::string open;
  std::string close;
};

struct ForcedToolCall {
  ToolCallFrame frame;
  // One per allowed tool (required: every tool; named: that one): lead names the tool
  // in the family's form, schema is its parameters, trail closes the call.
  std::vector<FramedJson> alternatives;
};

// The forced call of `request` (tool_choice required or named, tools not empty) in
// `format`'s syntax. Per family (open | lead ARGS trail | close):
//   Hermes        <tool_call>\n | {"name":"N","arguments": ARGS } | \n</tool_call>
//   Llama 3.x     (none) | {"name":"N","parameters": ARGS }
//   Mistral       [TOOL_CALLS] | [{"name":"N","arguments": ARGS }]
//   Firefunction   functools | [{"name":"N","arguments": ARGS }]
//   Functionary 3.1  <function= | N> ARGS | </function>
//   Functionary 3.2  (the prompt ends with >>>) | N\n ARGS
//   Command R7B   <|START_ACTION|> | [{"tool_call_id":"0","tool_name":"N","parameters": ARGS }] | <|END_ACTION|>
//   DeepSeek R1   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜> | N\n```json\n ARGS \n``` | <｜tool▁call▁end｜><｜tool▁calls▁end｜>
ForcedToolCall PlanForcedToolCall(const GenerationRequest& request, ToolCallFormat format);

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

// A call as far as it has been generated: the name once complete, the compact
// arguments text so far (a prefix of the final arguments).
struct PartialToolCall {
  std::string name;
  bool has_name = false;
  std::string arguments;
};

// The calls begun in `text` (an unfinished output of `format`), in order. Used by the
// stream filter; for a complete well-formed output the names and arguments equal
// ParseToolCallsOf's (Llama's <|python_tag|>name.call(...) form: name only).
std::vector<PartialToolCall> ScanPartialToolCalls(std::string_view text, ToolCallFormat format);

// One streamed tool_calls delta: `first` carries the name (and id/type in OpenAI's
// shape); every delta carries more of the arguments text (maybe "").
struct ToolCallDelta {
  size_t index = 0;
  bool first = false;
  std::string name;
  std::string arguments;
};

class ToolCallStreamFilter {
 public:
  // `forced` (null: not forced): the output follows forced->open.
  ToolCallStreamFilter(ToolCallFormat format, const ToolCallFrame* forced);
  // Content text that may be streamed now (text that may start a call is held);
  // appends to `deltas` the tool-call deltas the text completes (a call is announced
  // once its name is complete, then its arguments follow as they arrive).
  std::string Push(std::string_view text, std::vector<ToolCallDelta>* deltas);
  // At the end: the parse of everything, the held text to stream as content when it
  // held no call, and in `deltas` whatever the parse has beyond what was streamed
  // (calls whose name or arguments came only at the end).
  ParsedToolOutput Finish(std::string* held_content, std::vector<ToolCallDelta>* deltas);

 private:
  // Re-scans all_ (O(size) per chunk; a 30 KB call in 3-byte chunks costs ~0.4 s in all).
  void StreamCalls(std::vector<ToolCallDelta>* deltas);

  const ToolCallFormat format_;
  const bool forced_;
  ToolCallFrame frame_;
  std::string all_;        // frame_.open + the output so far
  size_t emitted_ = 0;     // bytes of all_ already streamed as content (or the open)
  bool in_call_ = false;   // a call started: hold everything from here
  std::vector<PartialToolCall> sent_;  // what was streamed of each call
};

}  // namespace sinew::model
