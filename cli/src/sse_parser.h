// SseParser: splits a text/event-stream body into events (id, event, data), per the
// HTML Server-Sent Events framing: fields on lines, a blank line ends an event,
// lines starting with ':' are comments. Bytes may arrive in any chunking.
//
// Thread-safety: none; one parser per stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace sinew::cli {

struct SseEvent {
  std::string id;
  std::string event;
  std::string data;
};

class SseParser {
 public:
  explicit SseParser(std::function<void(const SseEvent&)> on_event)
      : on_event_(std::move(on_event)) {}
  void Feed(std::string_view bytes);

 private:
  void Line(std::string_view line);

  std::function<void(const SseEvent&)> on_event_;
  std::string pending_;
  SseEvent current_;
  bool has_data_ = false;
};

}  // namespace sinew::cli
