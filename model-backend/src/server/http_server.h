// HttpServer: the HTTP/1.1 transport of sinew-model (Boost.Beast). Accepts connections,
// reads each request with a timeout and a body size limit, and hands it to a handler
// together with a ResponseStream; keeps connections alive between requests.
//
// Thread-safety: Start() returns a running server; Stop() may be called from any thread
// and is idempotent; the destructor stops the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "response_stream.h"
#include "sinew/status.h"

namespace sinew::model {

struct HttpServerOptions {
  // Address to listen on. Default: 127.0.0.1
  std::string host = "127.0.0.1";
  // Port; 0 picks a free one (see port()). Default: 8081
  uint16_t port = 8081;
  // Largest request body accepted; larger bodies get 400. Default: 1 MiB
  uint64_t max_body_bytes = 1 << 20;
  // Time allowed to read one request (headers and body), and the keep-alive idle time.
  // Default: 30 s
  std::chrono::seconds read_timeout{30};
  // Time allowed for one write to the client before the connection is dropped. Default: 60 s
  std::chrono::seconds write_timeout{60};
  // I/O threads. Default: 2
  int io_threads = 2;
};

// Receives every well-formed request. Runs on an I/O thread: it must not block (hand
// long work to another thread and answer through `stream` later).
using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<ResponseStream> stream)>;

class HttpServer {
 public:
  // Errors: InvalidArgument for a bad host, Unavailable if the address cannot be bound.
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                                 HttpHandler handler);
  virtual ~HttpServer() = default;
  virtual uint16_t port() const = 0;
  virtual void Stop() = 0;
};

}  // namespace sinew::model
