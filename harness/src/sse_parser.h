// Incremental parser of a text/event-stream body (the WHATWG format): feed it bytes as
// they arrive; it calls back once per complete event with its `event` and `data`.
//
// Thread-safety: none; one parser per stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace sinew::harness {

class SseParser {
 public:
  // `on_event(event_name, data)`; return false to stop parsing.
  using EventCallback = std::function<bool(const std::string& event, const std::string& data)>;
  explicit SseParser(EventCallback on_event) : on_event_(std::move(on_event)) {}
  // Returns false once a callback asked to stop.
  bool Feed(std::string_view bytes);

 private:
  bool Line(std::string_view line);
  EventCallback on_event_;
  std::string pending_;
  std::string event_;
  std::string data_;
  bool has_data_ = false;
};

}  // namespace sinew::harness
