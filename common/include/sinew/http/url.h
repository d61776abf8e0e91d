// URLs, percent-encoding and HTTP dates as HTTP clients and servers read them (libcurl's
// parsers, so that they agree with sinew::http::Fetch).
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "sinew/status.h"

namespace sinew::http {

// The parts of an absolute URL, as libcurl reads it.
struct UrlParts {
  std::string scheme;     // lower case, e.g. "https"
  std::string user;       // user info before '@'; "" when none
  std::string host;       // as written (IPv6 in brackets)
  std::string port;       // the port, or the scheme's default ("443" for https)
};

// Parses an absolute URL. Errors: kInvalidArgument "url '<url>' does not parse".
[[nodiscard]] Result<UrlParts> ParseUrl(const std::string& url);

// Decodes %XX escapes ("a%20b" -> "a b"); '+' is left as it is. A malformed escape is
// kept as written.
std::string PercentDecode(std::string_view text);

// Encodes every byte but ASCII letters, digits and "-._~" as %XX: a value that can go in
// a query string or a path segment.
std::string PercentEncode(std::string_view text);

// The time an HTTP date (RFC 9110: "Sun, 06 Nov 1994 08:49:37 GMT" and the two obsolete
// forms) stands for; nullopt when it does not parse.
std::optional<std::time_t> ParseHttpDate(const std::string& text);

}  // namespace sinew::http
