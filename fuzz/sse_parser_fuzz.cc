// SseParser::Feed (common/src/sse_parser.cc) on arbitrary bytes in arbitrary chunks.
// The first byte picks the chunk size; the events seen must not depend on it (the
// parser's contract: "in any chunking").
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sinew/sse_parser.h"

namespace {

std::vector<sinew::SseEvent> Parse(std::string_view body, size_t chunk) {
  std::vector<sinew::SseEvent> events;
  sinew::SseParser parser([&](const sinew::SseEvent& e) {
    events.push_back(e);
    return events.size() < 64;  // exercise the stop path too
  });
  for (size_t at = 0; at < body.size(); at += chunk) {
    if (!parser.Feed(body.substr(at, chunk))) break;
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string_view body = sinew::fuzz::Bytes(data + 1, size - 1);
  const auto whole = Parse(body, body.size() + 1);
  const auto split = Parse(body, chunk);
  if (whole.size() != split.size()) sinew::fuzz::Violated("event count depends on chunking");
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].id != split[i].id || whole[i].event != split[i].event ||
        whole[i].data != split[i].data) {
      sinew::fuzz::Violated("event content depends on chunking");
    }
  }
  return 0;
}
