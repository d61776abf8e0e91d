// The harness's outgoing HTTP: the common client (sinew/http/client.h), with a transfer
// the caller stopped reported as kCancelled (model calls and the http_request tool treat
// a cancelled call as one that did not finish).
#pragma once

#include "sinew/http/client.h"

namespace sinew::harness {

using HttpRequest = http::ClientRequest;
using HttpResponse = http::ClientResponse;
using http::ChunkCallback;
using http::InitCurlOnce;

// `response`, with a transfer the caller stopped (request.stop set, or the chunk callback
// returned false) as kCancelled "`what`: stopped".
[[nodiscard]] inline Result<HttpResponse> CancelledIfStopped(Result<HttpResponse> response, const std::string& what) {
  if (response.ok() && response->stopped) return Status::Cancelled(what + ": stopped");
  return response;
}

// http::Fetch, with a stopped transfer as kCancelled. Errors otherwise: those of
// http::Fetch.
[[nodiscard]] inline Result<HttpResponse> PerformHttp(const HttpRequest& request,
                                                      const ChunkCallback& on_chunk = nullptr) {
  return CancelledIfStopped(http::Fetch(request, on_chunk), request.method + " " + request.url);
}

}  // namespace sinew::harness
