// A forced tool call (tool_choice required or named) in the family's own syntax: its
// opening text is appended to the prompt (ForcedToolCall::frame.open), the output is
// constrained to one of the alternatives (the tool's name in the family's form, its
// arguments object, the family's text after it), and the output is parsed with the
// family's parser (tool_call_parser.h) after frame.open + output + frame.close.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
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

}  // namespace sinew::model
