// ParseOpenAiRequest (model-backend/src/server/openai_request.cc): a request body is
// parsed as sinew-model's handler does (boost::json, depth 64), then validated as a
// chat (first byte odd) or completions request.
#include <boost/json.hpp>
#include <cstdint>

#include "fuzz_util.h"
#include "openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 64;  // as model-backend/src/server/api_handler.cc
  boost::json::value body =
      boost::json::parse(sinew::fuzz::Bytes(data + 1, size - 1), ec, boost::json::storage_ptr(), options);
  if (ec) return 0;
  sinew::model::ParseLimits limits;
  limits.model_id = "stories260K";
  limits.default_max_tokens = chat ? 512 : 16;
  auto parsed = sinew::model::ParseOpenAiRequest(body, chat, limits);
  if (!parsed.ok() && parsed.status().message().empty()) {
    sinew::fuzz::Violated("a refused request has no message");
  }
  return 0;
}
