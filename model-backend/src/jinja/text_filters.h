// Jinja2's filters that compute text from text or values: center, truncate, wordwrap,
// wordcount, filesizeformat, format (printf-style) and pprint (those of HTML and URLs are
// in markup_filters.h). Each gives what its Python counterpart (Jinja2 3.1 under
// ImmutableSandboxedEnvironment, no autoescape) gives; inputs where an exact answer would
// need more of Python than is here are errors, never different text. Results are held to
// the render's bounds (bounds.h) before they are built. All throw JinjaError on failure.
#pragma once

#include "value.h"

namespace sinew::jinja {

Value FilterCenter(const Value& v, const CallArgs& args);          // (width=80)
Value FilterTruncate(const Value& v, const CallArgs& args);        // (length=255, killwords, end, leeway=5)
Value FilterWordwrap(const Value& v, const CallArgs& args);        // (width=79, break_long_words, wrapstring, break_on_hyphens)
Value FilterWordcount(const Value& v, const CallArgs& args);
Value FilterFilesizeformat(const Value& v, const CallArgs& args);  // (binary=false)
Value FilterFormat(const Value& v, const CallArgs& args);          // (*args | **kwargs)
Value FilterPprint(const Value& v, const CallArgs& args);

// Python's `\w` for one code point (str patterns): a letter, a number or '_'.
bool IsPyWordChar(char32_t c);

}  // namespace sinew::jinja
