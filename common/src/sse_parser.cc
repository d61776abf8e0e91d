#include "sinew/sse_parser.h"

namespace sinew {

bool SseParser::Feed(std::string_view bytes) {
  if (stopped_) return false;
  pending_.append(bytes);
  size_t start = 0;
  while (!stopped_) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!Line(line)) stopped_ = true;
    start = nl + 1;
  }
  pending_.erase(0, start);
  return !stopped_;
}

bool SseParser::Line(std::string_view line) {
  if (line.empty()) {
    bool go_on = true;
    if (has_data_) go_on = on_event_(current_);
    current_ = SseEvent{};
    has_data_ = false;
    return go_on;
  }
  if (line.front() == ':') return true;  // a comment (keepalive)
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
  return true;
}

}  // namespace sinew
