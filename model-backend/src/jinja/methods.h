// Python's str and dict behaviour that Jinja templates reach: str methods (strip, split,
// startswith, replace, ...), dict methods (items, keys, values, get) as bound functions,
// the `in` operator, and the string helpers the filters share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "value.h"

namespace sinew::jinja {

// str.strip/lstrip/rstrip: without `has_chars`, Python whitespace.
std::string PyStrip(const std::string& s, const std::string& chars, bool left, bool right, bool has_chars);
std::string PyLower(const std::string& s);
std::string PyUpper(const std::string& s);
std::string PyCapitalize(const std::string& s);
std::string PyTitle(const std::string& s);
// str.islower() / str.isupper(): at least one cased character, none of the other case.
bool PyIsLower(const std::string& s);
bool PyIsUpper(const std::string& s);
std::string PyReplace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
// str.splitlines() (without keepends).
std::vector<std::string> PySplitLines(const std::string& s);
// Python `needle in haystack` (substring, list member, dict key).
bool Contains(const Value& haystack, const Value& needle);
// The bound method `name` of a str or dict value, if Python has one the sandbox allows.
std::optional<Value> Method(const Value& object, const std::string& name);

}  // namespace sinew::jinja
