// One HTTP request over libcurl, with a streaming body callback, a whole-request
// timeout and cancellation. Used by the model clients and the http_request proxy tool.
//
// Thread-safety: each call uses its own easy handle; call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace sinew::harness {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  uint32_t timeout_ms = 30000;
  uint32_t connect_timeout_ms = 5000;
  size_t max_response_bytes = 64u << 20;  // more is cut and `truncated` set
  const std::atomic<bool>* cancelled = nullptr;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty when a chunk callback consumed it
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  bool truncated = false;
};

// Called with each chunk of the response body as it arrives; return false to abort.
using ChunkCallback = std::function<bool(std::string_view chunk)>;

// Performs the request. A non-2xx answer is still OK here (see response.status).
// Errors: kDeadlineExceeded (timeout), kCancelled, kUnavailable (connect/transport).
[[nodiscard]] Result<HttpResponse> PerformHttp(const HttpRequest& request,
                                               const ChunkCallback& on_chunk = nullptr);

// Initialises libcurl once per process (idempotent, thread-safe).
void InitCurlOnce();

}  // namespace sinew::harness
