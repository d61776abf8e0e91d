#include "sinew/http/url.h"

#include <curl/curl.h>

#include <memory>

namespace sinew::http {

Result<UrlParts> ParseUrl(const std::string& url) {
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (u == nullptr || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    return Status::InvalidArgument("url '" + url + "' does not parse");
  }
  auto part = [&](CURLUPart which, unsigned flags) -> std::string {
    char* out = nullptr;
    if (curl_url_get(u.get(), which, &out, flags) != CURLUE_OK || out == nullptr) return "";
    std::string s(out);
    curl_free(out);
    return s;
  };
  UrlParts parts;
  parts.scheme = part(CURLUPART_SCHEME, 0);
  parts.user = part(CURLUPART_USER, 0);
  parts.host = part(CURLUPART_HOST, 0);
  parts.port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  return parts;
}

std::string PercentDecode(std::string_view text) {
  const std::string raw(text);
  int length = 0;
  char* decoded = curl_easy_unescape(nullptr, raw.c_str(), static_cast<int>(raw.size()), &length);
  if (decoded == nullptr) return raw;
  std::string out(decoded, static_cast<size_t>(length));
  curl_free(decoded);
  return out;
}

std::string PercentEncode(std::string_view text) {
  const std::string raw(text);
  char* encoded = curl_easy_escape(nullptr, raw.c_str(), static_cast<int>(raw.size()));
  if (encoded == nullptr) return raw;
  std::string out(encoded);
  curl_free(encoded);
  return out;
}

std::optional<std::time_t> ParseHttpDate(const std::string& text) {
  const time_t at = curl_getdate(text.c_str(), nullptr);
  if (at < 0) return std::nullopt;
  return at;
}

}  // namespace sinew::http
