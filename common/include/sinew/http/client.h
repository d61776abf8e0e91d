// sinew::http::Fetch: the one HTTP client of every Sinew process (libcurl): one request
// with a streaming body callback, timeouts, cancellation and TLS (a CA bundle to trust,
// and a client certificate where the server asks for one).
//
// Thread-safety: each call uses its own easy handle; call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinew/status.h"

namespace sinew::http {

struct ClientTls {
  // PEM CA bundle trusted for https URLs. Default (""): the system's
  std::string ca_file;
  // PEM client certificate and key, presented when the server asks. Default: none
  std::string cert_file;
  std::string key_file;
};

struct ClientRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  // Whole-request limit; 0: none (for event streams). Default: 30 s
  uint32_t timeout_ms = 30000;
  uint32_t connect_timeout_ms = 5000;
  // A transfer slower than 1 byte/s for this long is broken; 0: off. Default: off
  uint32_t low_speed_seconds = 0;
  size_t max_response_bytes = 64u << 20;  // more is cut and `truncated` set
  // Setting it stops the transfer within about a second (response.stopped).
  const std::atomic<bool>* stop = nullptr;
  // Called about once a second while the transfer runs (may be empty).
  std::function<void()> on_tick;
  ClientTls tls;
  // libcurl resolve entries "host:port:addr[,addr...]": connect to these addresses for
  // that host instead of resolving it (a caller that checked where a name points).
  // Default: none
  std::vector<std::string> resolve;
};

struct ClientResponse {
  long status = 0;
  std::string body;  // empty when a chunk callback consumed it
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  bool truncated = false;
  // The caller ended the transfer early (*stop, or the chunk callback said false).
  bool stopped = false;

  // The first header called `lower_case_name`, "" if absent.
  std::string_view Header(std::string_view lower_case_name) const;
};

// Called with each chunk of the response body as it arrives; return false to stop.
using ChunkCallback = std::function<bool(std::string_view chunk)>;

// Performs the request. Any HTTP status is OK here (see response.status), and so is a
// transfer the caller stopped (response.stopped). Errors: kDeadlineExceeded (timeout),
// kUnavailable (connect, TLS or transport failure; the message names the URL).
[[nodiscard]] Result<ClientResponse> Fetch(const ClientRequest& request, const ChunkCallback& on_chunk = nullptr);

// Fetch for many requests at once without a thread each: libcurl's multi interface on
// one thread of the client's own. Start returns at once; `done` gets what Fetch would
// return, on that thread, as do `on_chunk` and `request.on_tick`: all three must be quick
// and must not block (post to an executor). `request.stop` is seen within about a
// second. Stop (and the destructor) ends the transfers still running, each `done` getting
// kCancelled. Thread-safety: Start and Stop may be called from any thread.
class AsyncClient {
 public:
  using Done = std::function<void(Result<ClientResponse>)>;
  AsyncClient();
  ~AsyncClient();
  AsyncClient(const AsyncClient&) = delete;
  AsyncClient& operator=(const AsyncClient&) = delete;
  void Start(ClientRequest request, ChunkCallback on_chunk, Done done);
  // Ends the transfers still running (kCancelled) and joins the client's thread; a later
  // Start is answered kCancelled at once. Idempotent; the destructor calls it.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Initialises libcurl once per process (idempotent, thread-safe).
void InitCurlOnce();

}  // namespace sinew::http
