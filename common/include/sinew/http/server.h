// sinew::http::Server: the one HTTP/1.1 server of every Sinew process (Boost.Beast on
// Asio), plain or TLS. It reads each request with a timeout and size limits, answers
// malformed or oversized requests itself (a 4xx in the caller's error shape, then
// closes), and hands every well-formed request to a handler together with a
// ResponseStream: one whole response, or a stream of server-sent events. Connections
// are kept alive between requests.
//
// TLS: with a certificate and key the server speaks only TLS (1.2 or newer). The files
// are read again by ReloadTls(), on SIGHUP, and when their modification time changes
// (checked every `tls.watch_interval`); connections already open keep the context they
// were accepted with, so a reload drops nothing. A reload that fails keeps the old
// certificate and logs why.
//
// Thread-safety: Start() returns a running server; Stop() may be called from any thread
// and is idempotent; the destructor stops the server. The handler runs on an I/O thread
// and must not block: hand long work to another thread and answer through the stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinew/status.h"

namespace sinew::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;        // "GET", "POST", ...
  std::string target;        // path and query, e.g. "/v1/completions"
  std::string content_type;  // the Content-Type header, "" if absent
  Headers headers;           // every header, names in lower case, in arrival order
  std::string body;
  std::string peer;  // the client's address, "ip:port"

  // The first header called `lower_case_name`, "" if absent.
  std::string_view Header(std::string_view lower_case_name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // extra headers (Retry-After is added to 429 and 503 when absent)
};

// Implemented by the connection. Every method may be called from any thread (the
// connection serialises its writes), but one request's calls must be made in order:
// Send once, or StartEvents, SendEvent..., EndEvents.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // One complete response.
  virtual void Send(Response response) = 0;
  void Send(int status, std::string content_type, std::string body) {
    Send(Response{status, std::move(content_type), std::move(body), {}});
  }
  // Starts a `text/event-stream` response (chunked). False if the client has gone.
  virtual bool StartEvents(Headers extra_headers = {}) = 0;
  // Sends `data` (already formatted, e.g. "data: {...}\n\n"). False if the client has gone.
  virtual bool SendEvent(std::string data) = 0;
  // Ends the event stream.
  virtual void EndEvents() = 0;
  // False once the client has hung up (then nothing sent reaches it).
  virtual bool ClientConnected() const = 0;
  // Blocks the calling thread (never an I/O thread) until no more than `max_queued_bytes`
  // wait to be written, so a slow reader slows its writer down instead of growing memory.
  // False when the client has gone or the write timeout passed first.
  virtual bool WaitForRoom(size_t max_queued_bytes) = 0;
  // WaitForRoom without a thread: calls `room(true)` once no more than
  // `max_queued_bytes` wait to be written, `room(false)` once the client has gone. It may
  // run before OnRoom returns, or on an I/O thread: it must be quick and must not block.
  // The caller keeps its own write timeout. A second OnRoom before the first fired
  // replaces it (the first is called with false).
  virtual void OnRoom(size_t max_queued_bytes, std::function<void(bool)> room) = 0;
};

using Handler = std::function<void(Request request, std::shared_ptr<ResponseStream> stream)>;

// Shapes the body of the errors the server answers by itself (malformed HTTP, too large,
// too many connections): `code` is a short machine-readable word. Default:
// {"error":{"code":code,"message":message}}.
using ErrorBodyFn = std::function<std::string(int status, const std::string& code, const std::string& message)>;

struct TlsOptions {
  // PEM certificate chain and private key; both empty means plain TCP. Default: plain
  std::string cert_file;
  std::string key_file;
  // How often the files' modification times are checked for a reload; 0 turns the
  // check off (SIGHUP and ReloadTls() still reload). Default: 2 s
  std::chrono::milliseconds watch_interval{2000};
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

struct ServerOptions {
  // Address to listen on (an IP address). Default: 127.0.0.1
  std::string host = "127.0.0.1";
  // Port; 0 picks a free one (see port()). Default: 0
  uint16_t port = 0;
  // Largest request body accepted; a larger one is answered 413. Default: 1 MiB
  uint64_t max_body_bytes = 1 << 20;
  // Largest request head (request line and headers); larger is answered 431. Default: 64 KiB
  uint32_t max_header_bytes = 64 * 1024;
  // Time allowed to read one request (and the TLS handshake), and the keep-alive idle
  // time. Default: 30 s
  std::chrono::milliseconds read_timeout{30000};
  // Time allowed for one write to the client before the connection is dropped. Default: 60 s
  std::chrono::milliseconds write_timeout{60000};
  // I/O threads. Default: 2
  int io_threads = 2;
  // Open connections allowed; one more is answered 503 and closed. 0: no limit. Default: 0
  uint32_t max_connections = 0;
  // The Server header. Default: "sinew"
  std::string server_name = "sinew";
  TlsOptions tls;
  ErrorBodyFn error_body;  // default: see ErrorBodyFn
};

class Server {
 public:
  // Errors: InvalidArgument for a bad host or unreadable/mismatched TLS files,
  // Unavailable if the address cannot be bound.
  [[nodiscard]] static Result<std::unique_ptr<Server>> Start(const ServerOptions& options, Handler handler);
  virtual ~Server() = default;
  virtual uint16_t port() const = 0;
  // "host:port" as bound.
  virtual std::string address() const = 0;
  // Reads the certificate and key again; new connections use them. On error the old ones
  // stay in use. FailedPrecondition when the server is not serving TLS.
  [[nodiscard]] virtual Status ReloadTls() = 0;
  // How many times the TLS files have been loaded successfully (1 after Start).
  virtual uint64_t tls_generation() const = 0;
  // Stops accepting and closes every connection, then waits (at most `drain`) for the
  // handlers still holding a ResponseStream to let it go, then stops the I/O threads.
  virtual void Stop(std::chrono::milliseconds drain) = 0;
  void Stop() { Stop(std::chrono::seconds(10)); }
};

// Plain HTTP only on loopback: an options set without TLS whose host is not a loopback
// address is refused (InvalidArgument naming `insecure_flag`) unless `insecure` is set.
[[nodiscard]] Status CheckPlainOnlyOnLoopback(const std::string& host, bool tls, bool insecure,
                                              const std::string& insecure_flag);

// The default error body: {"error":{"code":...,"message":...}}.
std::string DefaultErrorBody(int status, const std::string& code, const std::string& message);

}  // namespace sinew::http
