#include "sse_parser.h"

namespace sinew::harness {

bool SseParser::Feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t start = 0;
  while (true) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = nl + 1;
    if (!Line(line)) {
      pending_.erase(0, start);
      return false;
    }
  }
  pending_.erase(0, start);
  return true;
}

bool SseParser::Line(std::string_view line) {
  if (line.empty()) {
    bool keep = true;
    if (has_data_) keep = on_event_(event_.empty() ? "message" : event_, data_);
    event_.clear();
    data_.clear();
    has_data_ = false;
    return keep;
  }
  if (line.front() == ':') return true;  // comment
  auto colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_ = std::string(value);
  }
  return true;
}

}  // namespace sinew::harness
