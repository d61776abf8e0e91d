#include "http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/strand.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "async.h"

#include "sinew/http/server.h"
#include "sinew/trace.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

// An event stream holds at most this much unsent before its writer waits for the client.
constexpr size_t kStreamQueueBytes = 1 << 20;

// Splits "host:port" (IPv6 hosts in brackets).
Status SplitListen(const std::string& listen, std::string* host, uint16_t* port) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("listen address must be host:port: " + listen);
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  const std::string digits = listen.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(digits) > 65535)
    return Status::InvalidArgument("listen port is not a port number: " + listen);
  *port = static_cast<uint16_t>(std::stoul(digits));
  return Status::Ok();
}

// The log context of one API request: the caller's trace when it sent a valid
// `traceparent` (continued, with the caller's span as parent_span_id), else the trace of
// the session the path names, else a new trace; a span of its own; the session.
LogFields RequestLogFields(const ApiRequest& api) {
  LogFields fields = FieldsForIncoming(api.traceparent);
  const std::string session = SanitizeUtf8(ApiHandler::SessionIdOf(api).substr(0, 64));
  if (!session.empty()) {
    fields.session = session;
    if (!ParseTraceparent(api.traceparent)) fields.trace_id = TraceIdForSession(session);
  }
  return fields;
}

// One line per request once it is answered: info for requests that change something,
// debug for reads (a console polls them), warning for a 5xx. The path without its query.
void LogRequest(const ApiRequest& api, int status, std::chrono::steady_clock::time_point started) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  const std::string method = SanitizeUtf8(api.method.substr(0, 16));
  const std::string path = SanitizeUtf8(api.target.substr(0, std::min<size_t>(api.target.find('?'), 200)));
  const auto level = status >= 500 ? spdlog::level::warn
                     : api.method == "GET" ? spdlog::level::debug
                                           : spdlog::level::info;
  spdlog::log(level, "api {} {} -> {} in {} ms", method, path, status, ms.count());
}

// The REST API on the shared HTTP server. ApiHandler::Handle blocks (store calls,
// forwarding), so ordinary requests run on a pool of config.api_threads threads, never
// on an I/O thread; more wait in its queue. A request forwarded from another harness runs
// on a second, smaller pool: it never forwards again, so it always finds a thread even
// when every thread of the first pool waits on another harness that forwards back. An
// event stream, which lives as long as its client follows, is a coroutine on the
// harness's driver threads instead: it holds no thread while it waits for an event or for
// its client to read (ApiHandler's blocking pieces run on the store pool). Stop waits for
// both.
class ApiServer final : public HttpServer {
 public:
  ApiServer(ApiHandler* handler, Metrics* metrics, StreamExecutors executors, uint32_t api_threads)
      : handler_(handler),
        metrics_(metrics),
        executors_(executors),
        requests_(api_threads),
        forwarded_(std::max<uint32_t>(2, api_threads / 4)) {}
  ~ApiServer() override { Stop(); }

  Status Listen(const HarnessConfig& config) {
    http::ServerOptions options;
    SINEW_RETURN_IF_ERROR(SplitListen(config.listen, &options.host, &options.port));
    options.max_body_bytes = config.max_request_bytes;
    options.read_timeout = std::chrono::seconds(config.read_timeout_seconds);
    options.write_timeout = kWriteTimeout;
    options.max_connections = config.max_connections;
    options.server_name = "sinew-harness";
    options.tls.cert_file = config.tls.cert_file;
    options.tls.key_file = config.tls.key_file;
    options.error_body = [](int status, const std::string& code, const std::string& message) {
      return ApiHandler::Error(status, code, message).body;
    };
    SINEW_ASSIGN_OR_RETURN(server_, http::Server::Start(options, [this](http::Request request,
                                                                     std::shared_ptr<http::ResponseStream> stream) {
      Dispatch(std::move(request), std::move(stream));
    }));
    return Status::Ok();
  }

  std::string address() const override { return server_->address(); }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    if (server_) server_->Stop();
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  static constexpr std::chrono::seconds kWriteTimeout{30};

  void Dispatch(http::Request request, std::shared_ptr<http::ResponseStream> stream) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) {
        stream->Send(ToHttp(ApiHandler::Error(503, "unavailable", "the harness is stopping")));
        return;
      }
      ++running_;
    }
    ApiRequest api = ToApi(std::move(request));
    if (ApiHandler::IsStream(api)) {
      asio::co_spawn(asio::make_strand(*executors_.io), ServeStream(std::move(api), std::move(stream)),
                     [this](const std::exception_ptr&) { Done(); });
      return;
    }
    asio::thread_pool& pool = api.forwarded ? forwarded_ : requests_;
    asio::post(pool, [this, api = std::move(api), stream = std::move(stream)]() mutable {
      Serve(api, stream);
      stream.reset();
      Done();
    });
  }

  void Done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--running_ == 0) idle_.notify_all();
  }

  static ApiRequest ToApi(http::Request request) {
    ApiRequest api;
    api.method = std::move(request.method);
    api.target = std::move(request.target);
    api.authorization = std::string(request.Header("authorization"));
    api.content_type = std::move(request.content_type);
    api.last_event_id = std::string(request.Header("last-event-id"));
    api.accept = std::string(request.Header("accept"));
    api.traceparent = std::string(request.Header("traceparent"));
    api.forwarded = !request.Header("x-sinew-forwarded").empty();
    api.remote_address = std::move(request.peer);
    api.body = std::move(request.body);
    return api;
  }

  static http::Response ToHttp(const ApiResponse& r) { return http::Response{r.status, r.content_type, r.body, r.headers}; }

  void Count(int status) {
    metrics_->Add("sinew_harness_http_requests_total", "code=\"" + std::to_string(status) + "\"");
  }

  void Serve(const ApiRequest& api, const std::shared_ptr<http::ResponseStream>& stream) {
    const auto started = std::chrono::steady_clock::now();
    ScopedLogContext context(RequestLogFields(api));
    ApiResponse response;
    try {
      response = handler_->Handle(api);
    } catch (const std::exception& e) {
      response = ApiHandler::Error(500, "internal", std::string("unexpected failure: ") + e.what());
    }
    Count(response.status);
    if (response.events) {
      ServeEvents(response, *stream);
      LogRequest(api, response.status, started);
      return;
    }
    stream->Send(ToHttp(response));
    if (!response.created_session.empty()) {
      LogFields fields = CurrentLogFields();
      fields.session = response.created_session;
      if (!ParseTraceparent(api.traceparent)) fields.trace_id = TraceIdForSession(response.created_session);
      ScopedLogContext with_session(std::move(fields));
      LogRequest(api, response.status, started);
      return;
    }
    LogRequest(api, response.status, started);
  }

  // An answer that is an event stream written from this thread (ApiResponse::events).
  static void ServeEvents(const ApiResponse& response, http::ResponseStream& stream) {
    constexpr size_t kQueuedBytes = 1 << 20;
    const bool started = stream.StartEvents(response.headers);
    bool open = started;
    response.events([&](const std::string& event, const std::string& data) {
      open = open && stream.WaitForRoom(kQueuedBytes) && stream.SendEvent("event: " + event + "\ndata: " + data + "\n\n");
      return open;
    });
    if (started) stream.EndEvents();
  }

  // The event stream as a coroutine on its own strand (WaitForCallback needs one).
  Task<void> ServeStream(ApiRequest api, std::shared_ptr<http::ResponseStream> stream) {
    const auto started = std::chrono::steady_clock::now();
    ReplaceLogFields(RequestLogFields(api));
    int status = 500;
    bool answered = false;
    try {
      ApiHandler::StreamOpening opening =
          co_await OnPool(*executors_.pool, [&] { return handler_->OpenStream(api); });
      status = opening.response.status;
      Count(status);
      answered = true;
      if (status != 200) {
        stream->Send(ToHttp(opening.response));
      } else if (stream->StartEvents(opening.response.headers)) {
        if (opening.watcher) co_await Follow(*opening.watcher, opening.session_id, stream);
        stream->EndEvents();
      }
    } catch (const std::exception& e) {
      spdlog::error("event stream failed: {}", e.what());
      if (!answered) stream->Send(ToHttp(ApiHandler::Error(500, "internal", std::string("unexpected failure: ") + e.what())));
    }
    LogRequest(api, status, started);
    ReplaceLogFields({});
  }

  // Sends the watcher's events until the stream is complete, the client leaves or reads
  // nothing for kWriteTimeout, or the harness stops (seen within a second); a comment
  // line after 15 s without events keeps proxies from closing an idle stream.
  Task<void> Follow(store::EventWatcher& watcher, const std::string& session_id,
                    const std::shared_ptr<http::ResponseStream>& stream) {
    using Clock = std::chrono::steady_clock;
    constexpr std::chrono::seconds kKeepalive{15};
    auto last_sent = Clock::now();
    v1::Event ev;
    while (!handler_->stopping()) {
      auto got = watcher.Next(&ev, std::chrono::milliseconds(0));
      if (!got.ok()) co_return;
      if (!*got) {
        if (Clock::now() - last_sent >= kKeepalive) {
          if (!stream->SendEvent(": keepalive\n\n")) co_return;
          last_sent = Clock::now();
        }
        co_await WaitForCallback<bool>([&](std::function<void(bool)> done) {
          watcher.OnReady([done] { done(true); });
        }, std::chrono::seconds(1));
        continue;
      }
      if (!stream->SendEvent(ApiHandler::StreamChunk(ev))) co_return;
      last_sent = Clock::now();
      // A slow reader slows the stream down instead of growing the queue.
      std::optional<bool> room = co_await WaitForCallback<bool>([&](std::function<void(bool)> done) {
        stream->OnRoom(kStreamQueueBytes, std::move(done));
      }, kWriteTimeout);
      if (!room.value_or(false)) co_return;
      if (!ApiHandler::MayEndStream(ev)) continue;  // no store call for the other events
      // Named, not inside a condition: GCC 12 mishandles temporaries there (docs/harness.md).
      auto ends = [&] { return handler_->StreamEndsAfter(session_id, ev); };
      const bool complete = co_await OnPool(*executors_.pool, ends);
      if (complete) co_return;
    }
  }

  ApiHandler* handler_;  // not owned
  Metrics* metrics_;     // not owned
  const StreamExecutors executors_;
  asio::thread_pool requests_;   // ordinary requests
  asio::thread_pool forwarded_;  // requests forwarded from another harness
  std::unique_ptr<http::Server> server_;
  std::mutex mutex_;
  std::condition_variable idle_;
  bool stopped_ = false;  // guarded by mutex_
  int running_ = 0;       // requests not yet done (queued, running, stream coroutines); guarded by mutex_
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HarnessConfig& config, ApiHandler* handler,
                                                      Metrics* metrics, StreamExecutors executors) {
  auto server = std::make_unique<ApiServer>(handler, metrics, executors, config.api_threads);
  SINEW_RETURN_IF_ERROR(server->Listen(config));
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace sinew::harness
