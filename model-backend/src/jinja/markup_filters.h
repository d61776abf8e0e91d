// Jinja2's filters of HTML and URLs: striptags, forceescape, urlencode, urlize and xmlattr.
// As in text_filters.h: each gives what its Python counterpart gives (Jinja2 3.1, no
// autoescape), an input that would need more of Python than is here is an error, and
// results are held to the render's bounds. All throw JinjaError on failure.
#pragma once

#include "value.h"

namespace sinew::jinja {

Value FilterStriptags(const Value& v, const CallArgs& args);
Value FilterForceescape(const Value& v, const CallArgs& args);
Value FilterUrlencode(const Value& v, const CallArgs& args);
Value FilterUrlize(const Value& v, const CallArgs& args);  // (trim_url_limit, nofollow, target, rel, extra_schemes)
Value FilterXmlattr(const Value& v, const CallArgs& args);  // (autospace=true)

}  // namespace sinew::jinja
