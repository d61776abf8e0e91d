// The JSON of tool calls as models write it, shared by the parsers (tool_call_parser.cc)
// and the stream scan (tool_call_stream.cc): call objects {"name"|"tool_name": ..,
// "arguments"|"parameters": ..} and arrays of them, scanned as far as the text goes,
// and arguments as compact JSON text (the whitespace outside strings removed).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "generation_request.h"
#include "tool_call_stream.h"

namespace sinew::model::tool_json {

// `s` without the whitespace (space, tab, CR, LF) at both ends.
std::string_view Trim(std::string_view s);
// The first index from `i` on that is not whitespace (s.size() if none).
size_t SkipSpace(std::string_view s, size_t i);
// JSON text without the whitespace outside strings. Byte by byte, so the compact form
// of a prefix is a prefix of the compact form of the whole.
std::string CompactJson(std::string_view raw);
// Scans the call object that starts at text[pos] == '{' as far as `text` goes: the
// name once its string is whole, the arguments object's compact text so far (given as a
// JSON string: once whole). Returns one past the object's end, or npos if it is
// unfinished or malformed.
size_t ScanCallObject(std::string_view text, size_t pos, PartialToolCall& out);
// Scans the array of call objects that starts at text[pos] == '['. Returns one past
// its end, or npos if it is unfinished or malformed.
size_t ScanCallArray(std::string_view text, size_t pos, std::vector<PartialToolCall>& calls);
// A JSON arguments object that starts at text[i] (after whitespace) as far as it goes.
// Returns one past its end, or npos if unfinished (or not an object: `started` false).
size_t ScanArguments(std::string_view text, size_t i, PartialToolCall& call, bool* started);
// A whole call object; its arguments as written (compact).
bool ParseCall(std::string_view text, ToolCallOut& out);
// A JSON array of call objects (Mistral, Firefunction, Command R7B); false if any fails.
bool ParseCallArray(std::string_view text, std::vector<ToolCallOut>& calls);

}  // namespace sinew::model::tool_json
