// Tool calls as they stream: the scan of an unfinished output for the calls begun so
// far, and the filter that keeps tool-call text out of streamed content and streams
// each call's arguments as they are generated.
//
// Thread-safety: free functions are pure; a ToolCallStreamFilter is used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "forced_tool_call.h"
#include "tool_call_parser.h"

namespace sinew::model {

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
