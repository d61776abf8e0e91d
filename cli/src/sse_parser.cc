#include "sse_parser.h"

namespace sinew::cli {

void SseParser::Feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t start = 0;
  while (true) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Line(line);
    start = nl + 1;
  }
  pending_.erase(0, start);
}

void SseParser::Line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) on_event_(current_);
    current_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (keepalive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "id") {
    current_.id = value;
  } else if (field == "event") {
    current_.event = value;
  } else if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  }
}

}  // namespace sinew::cli
