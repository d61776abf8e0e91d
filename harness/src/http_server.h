// HttpServer: the REST listener (Boost.Beast). One thread per connection, each with its
// own io_context so that every read and write has a timeout; a request body limit;
// HTTP/1.1 keep-alive; the event stream as a chunked response.
//
// Thread-safety: Stop() may be called from any thread, once or more.
#pragma once

#include <memory>
#include <string>

#include "api_handler.h"
#include "sinew/harness/config.h"

namespace sinew::harness {

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Binds `config.listen` and starts accepting. Errors: kUnavailable when it cannot bind.
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> Start(const HarnessConfig& config,
                                                                 ApiHandler* handler, Metrics* metrics);
  virtual std::string address() const = 0;
  // Stops accepting, shuts open connections down and waits for their threads.
  virtual void Stop() = 0;
};

}  // namespace sinew::harness
