// SseParser: splits a text/event-stream body (the WHATWG Server-Sent Events format) into
// events as bytes arrive, in any chunking: fields on lines (LF or CRLF), a blank line ends
// an event, lines starting with ':' are comments, several `data:` lines join with '\n'.
// Used by the harness's model clients and by the CLI's `tail`.
//
// Thread-safety: none; one parser per stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace sinew {

struct SseEvent {
  std::string id;                 // the `id:` field, "" when absent
  std::string event = "message";  // the `event:` field, "message" when absent
  std::string data;
};

class SseParser {
 public:
  // Called once per complete event; return false to stop parsing.
  using Callback = std::function<bool(const SseEvent&)>;
  explicit SseParser(Callback on_event) : on_event_(std::move(on_event)) {}

  // Returns false once a callback asked to stop (later bytes are ignored).
  bool Feed(std::string_view bytes);

 private:
  bool Line(std::string_view line);

  Callback on_event_;
  std::string pending_;
  SseEvent current_;
  bool has_data_ = false;
  bool stopped_ = false;
};

}  // namespace sinew
