// Chat template rendering (model-backend/src/jinja: JinjaTemplate::Parse and Render):
// the input is a template, rendered with a conversation like the server's (messages
// with tool calls, tools, add_generation_prompt, bos/eos tokens). Errors must come back
// as a Status with a message.
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>

#include "fuzz_util.h"
#include "sinew/model/jinja_template.h"

namespace {

boost::json::object Variables() {
  return boost::json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
      {"role": "assistant", "content": "It is sunny.", "reasoning_content": "easy"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "tools_in_user_message": false, "date_string": "01 Dec 2026"})").as_object();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const boost::json::object variables = Variables();
  auto parsed = sinew::model::JinjaTemplate::Parse(sinew::fuzz::Bytes(data, size));
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) sinew::fuzz::Violated("a refused template has no message");
    return 0;
  }
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1795000000));
  // Smaller bounds than the server's, so that a looping or growing input stays within the
  // fuzzer's time per input; the bounds' own paths are the same.
  sinew::model::RenderBounds bounds;
  bounds.max_steps = 20'000;  // a loop iteration costs ~35 us under ASan: 0.7 s at most
  bounds.max_text_bytes = 4 << 20;
  bounds.max_items = 100'000;
  auto rendered = parsed->Render(variables, now, bounds);
  if (!rendered.ok() && rendered.status().message().empty()) {
    sinew::fuzz::Violated("a failed render has no message");
  }
  return 0;
}
