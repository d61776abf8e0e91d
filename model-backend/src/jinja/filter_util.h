// Helpers shared by the filter files (text, markup and sequence filters, builtins.cc).
// All throw JinjaError on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "value.h"

namespace sinew::jinja {

// A Python int argument (bool counts); anything else is Python's TypeError.
int64_t IntArg(const Value& v, std::string_view what);
// The argument at `index` or named `name`; null when not given.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name);
// The same, failing as Python does ("what() missing required argument 'name'") when absent.
const Value& Required(const CallArgs& args, size_t index, std::string_view name, std::string_view what);
// Jinja's make_attrgetter: "a.b" looks up each part with getitem (a part of digits as an index).
Value Attribute(const Value& item, const std::string& path);
// A value's text as code points, and code points as UTF-8.
std::u32string Text(const Value& v);
std::string Utf8(std::u32string_view s);
// The text a string filter gives back: a Markup stays one (str methods of Markup).
Value Same(const Value& input, std::string text);
// str.split() with no arguments: runs of Python whitespace separate the parts.
std::vector<std::u32string> SplitWhitespace(const std::u32string& s);
// s.strip() == ''.
bool IsBlank(const std::u32string& s);
// Filters whose Python algorithm copies the rest of the text per step (striptags per tag,
// wordwrap per piece of a long word) count the bytes they copy in `copied`: past 1 GiB
// the input is refused instead of running for minutes.
void CountCopied(uint64_t& copied, size_t bytes, const char* filter);
// True when `s` has a byte outside ASCII.
bool HasNonAscii(std::string_view s);

}  // namespace sinew::jinja
