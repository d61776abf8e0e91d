// HttpServer: the REST API on sinew::http::Server (Boost.Beast on Asio): ordinary
// requests on a bounded pool (config.api_threads; forwarded ones on a pool of their own),
// event streams as coroutines that hold no thread while they wait (http_server.cc).
//
// Thread-safety: Stop() may be called from any thread, once or more.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>

#include "api_handler.h"
#include "sinew/harness/config.h"

namespace sinew::harness {

// Where event streams run: coroutines on `io` (the harness's driver io_context), their
// blocking store calls on `pool`. Neither is owned; both outlive the server.
struct StreamExecutors {
  boost::asio::io_context* io = nullptr;
  boost::asio::thread_pool* pool = nullptr;
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Binds `config.listen` and starts accepting. Errors: kUnavailable when it cannot bind.
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> Start(const HarnessConfig& config,
                                                                 ApiHandler* handler, Metrics* metrics,
                                                                 StreamExecutors executors);
  virtual std::string address() const = 0;
  // Stops accepting, shuts open connections down and waits for their threads.
  virtual void Stop() = 0;
};

}  // namespace sinew::harness
