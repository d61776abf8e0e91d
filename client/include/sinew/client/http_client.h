// HttpClient: HTTP calls to the harness (for ApiClient), over the common client (sinew/http/client.h).
//
// Thread-safety: one HttpClient per thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "sinew/http/client.h"
#include "sinew/status.h"

namespace sinew::client {

struct HttpResponse {
  long status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `base_url` like "http://127.0.0.1:8080"; `api_key` goes in an Authorization header.
  // `ca_file` (may be empty: the system's) is the CA bundle trusted for an https server.
  HttpClient(std::string base_url, std::string api_key, std::string ca_file = "");

  // One request. kUnavailable when the server cannot be reached (the message names it).
  [[nodiscard]] Result<HttpResponse> Send(const std::string& method, const std::string& path,
                                          const std::string& body = "",
                                          const std::string& content_type = "application/json");

  // A streaming GET: `on_data` receives body bytes as they arrive and returns false to
  // stop. Returns the HTTP status once the stream ends; kUnavailable when the connection
  // could not be made or broke (the caller may reconnect).
  // `on_tick` (may be empty) is called about once a second while the stream is open,
  // so a caller can show progress while no data comes. Setting `*stop` (may be null; from
  // on_tick or another thread) ends the stream at the next tick, as if the server had
  // ended it.
  [[nodiscard]] Result<long> Stream(const std::string& path,
                                    const std::vector<std::string>& headers,
                                    const std::function<bool(std::string_view)>& on_data,
                                    const std::function<void()>& on_tick = {},
                                    const std::atomic<bool>* stop = nullptr);

  // A POST of JSON `body` whose answer is read as it arrives (text/event-stream asked
  // for), as Stream reads it, without Stream's limit on silence: a call may write nothing
  // for a long time. Returns the HTTP status once the answer ends.
  [[nodiscard]] Result<long> PostStream(const std::string& path, const std::string& body,
                                        const std::function<bool(std::string_view)>& on_data);

  const std::string& base_url() const { return base_url_; }

 private:
  std::string base_url_;
  std::string api_key_;
  http::ClientTls tls_;
};

}  // namespace sinew::client
