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

// http::Fetch, with a stopped transfer (request.stop set, or `on_chunk` returned false)
// as kCancelled. Errors otherwise: those of http::Fetch.
[[nodiscard]] inline Result<HttpResponse> PerformHttp(const HttpRequest& request,
                                                      const ChunkCallback& on_chunk = nullptr) {
  auto response = http::Fetch(request, on_chunk);
  if (response.ok() && response->stopped) return Status::Cancelled(request.method + " " + request.url + ": stopped");
  return response;
}

}  // namespace sinew::harness
