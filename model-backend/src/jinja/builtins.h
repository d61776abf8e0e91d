// Jinja2's filters and tests (every builtin of Jinja2 3.1; the text-making ones are in
// text_filters.h), attribute and item access (with the Python methods of str and
// dict that chat templates call), and the globals transformers provides. Each behaves as
// its Python counterpart under ImmutableSandboxedEnvironment; differences are errors,
// never silently different output. All functions throw JinjaError on failure.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "value.h"

namespace sinew::jinja {

bool HasFilter(std::string_view name);
bool HasTest(std::string_view name);
Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args);
bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args);

// `obj.name` and `obj[key]` with Jinja's fallbacks between the two (environment.getattr
// and getitem): a missing key is Undefined; anything of Undefined is an error.
Value GetAttr(const Value& object, const std::string& name);
Value GetItem(const Value& object, const Value& key);
// obj[start:stop:step]; a null pointer is an omitted part.
Value GetSlice(const Value& object, const Value* start, const Value* stop, const Value* step);

// range, dict, namespace, raise_exception, strftime_now (formats `now` in local time).
void AddGlobals(DictData& globals, std::chrono::system_clock::time_point now);

}  // namespace sinew::jinja
