#include "http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <set>
#include <thread>

namespace sinew::harness {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr auto kWriteTimeout = std::chrono::seconds(30);

class BeastServer final : public HttpServer {
 public:
  BeastServer(const HarnessConfig& config, ApiHandler* handler, Metrics* metrics)
      : config_(config), handler_(handler), metrics_(metrics), acceptor_(accept_ioc_) {}
  ~BeastServer() override { Stop(); }

  Status Bind() {
    const auto colon = config_.listen.rfind(':');
    if (colon == std::string::npos) return Status::InvalidArgument("listen address must be host:port");
    boost::system::error_code ec;
    auto ip = net::ip::make_address(config_.listen.substr(0, colon), ec);
    if (ec) return Status::InvalidArgument("listen host is not an IP address: " + config_.listen);
    const int port = std::atoi(config_.listen.c_str() + colon + 1);
    tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(1024, ec);
    if (ec) return Status::Unavailable("cannot listen on " + config_.listen + ": " + ec.message());
    auto local = acceptor_.local_endpoint();
    address_ = local.address().to_string() + ":" + std::to_string(local.port());
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return Status::Ok();
  }

  std::string address() const override { return address_; }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    boost::system::error_code ec;
    acceptor_.cancel(ec);
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    acceptor_.close(ec);
    if (accept_thread_.joinable()) accept_thread_.join();
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return connections_ == 0; });
  }

 private:
  void AcceptLoop() {
    while (true) {
      auto ioc = std::make_unique<net::io_context>(1);
      boost::system::error_code ec;
      tcp::socket socket = acceptor_.accept(*ioc, ec);
      if (ec) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopped_) return;
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
      if (connections_ >= config_.max_connections) {
        beast::tcp_stream stream(std::move(socket));
        http::response<http::string_body> res{http::status::service_unavailable, 11};
        res.set(http::field::content_type, "application/json");
        res.set(http::field::connection, "close");
        res.body() = R"({"error":{"code":"unavailable","message":"too many connections; retry"}})";
        res.prepare_payload();
        http::write(stream, res, ec);
        continue;
      }
      ++connections_;
      open_fds_.insert(socket.native_handle());
      std::thread([this, ioc = std::move(ioc), s = std::move(socket)]() mutable {
        const int fd = s.native_handle();
        Serve(*ioc, std::move(s));
        std::lock_guard<std::mutex> guard(mutex_);
        open_fds_.erase(fd);
        if (--connections_ == 0) idle_.notify_all();
      }).detach();
    }
  }

  // Runs one async operation on the connection's own io_context, bounded by `timeout`.
  template <typename Op>
  static boost::system::error_code RunWithTimeout(net::io_context& ioc, beast::tcp_stream& stream,
                                                  std::chrono::steady_clock::duration timeout, Op op) {
    boost::system::error_code result = net::error::operation_aborted;
    stream.expires_after(timeout);
    op([&](boost::system::error_code ec, size_t) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  static http::response<http::string_body> ToBeast(const ApiResponse& r, unsigned version, bool keep_alive) {
    http::response<http::string_body> res{static_cast<http::status>(r.status), version};
    res.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res.set(name, value);
    res.keep_alive(keep_alive);
    res.body() = r.body;
    res.prepare_payload();
    return res;
  }

  void Serve(net::io_context& ioc, tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    stream.socket().set_option(tcp::no_delay(true));
    beast::flat_buffer buffer;
    const auto read_timeout = std::chrono::seconds(config_.read_timeout_seconds);
    while (true) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(config_.max_request_bytes);
      parser.header_limit(64 * 1024);
      auto ec = RunWithTimeout(ioc, stream, read_timeout, [&](auto handler) {
        http::async_read(stream, buffer, parser, handler);
      });
      if (ec == http::error::body_limit) {
        auto res = ToBeast(ApiHandler::Error(413, "payload_too_large",
                                             "the request body is over " +
                                                 std::to_string(config_.max_request_bytes) + " bytes"),
                           11, false);
        RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
        break;
      }
      if (ec == http::error::header_limit) {
        auto res = ToBeast(ApiHandler::Error(413, "payload_too_large", "the request headers are too large"), 11,
                           false);
        RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
        break;
      }
      if (ec && ec.category() == http::make_error_code(http::error::bad_method).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message) {
        // Malformed HTTP: say so (as one 400), then close; the stream cannot be trusted.
        auto res = ToBeast(ApiHandler::Error(400, "invalid_argument", "malformed HTTP request: " + ec.message()),
                           11, false);
        RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
        break;
      }
      if (ec) break;  // closed or timed out: nothing more to say on this connection
      auto& req = parser.get();
      if (req.version() != 10 && req.version() != 11) {
        auto res = ToBeast(ApiHandler::Error(400, "invalid_argument",
                                             "HTTP version " + std::to_string(req.version() / 10) + "." +
                                                 std::to_string(req.version() % 10) +
                                                 " is not supported (use HTTP/1.1)"),
                           11, false);
        RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
        break;
      }
      ApiRequest api;
      api.method = std::string(req.method_string());
      api.target = std::string(req.target());
      api.authorization = std::string(req[http::field::authorization]);
      api.content_type = std::string(req[http::field::content_type]);
      api.last_event_id = std::string(req["Last-Event-ID"]);
      api.forwarded = !req["X-Sinew-Forwarded"].empty();
      api.body = std::move(req.body());
      const unsigned version = req.version();
      const bool keep_alive = req.keep_alive();
      if (ApiHandler::IsStream(api)) {
        ServeStream(ioc, stream, api, version);
        break;
      }
      ApiResponse r;
      try {
        r = handler_->Handle(api);
      } catch (const std::exception& e) {
        r = ApiHandler::Error(500, "internal", std::string("unexpected failure: ") + e.what());
      }
      metrics_->Add("sinew_harness_http_requests_total", "code=\"" + std::to_string(r.status) + "\"");
      auto res = ToBeast(r, version, keep_alive);
      ec = RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
      if (ec || !keep_alive) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  void ServeStream(net::io_context& ioc, beast::tcp_stream& stream, const ApiRequest& api, unsigned version) {
    bool streaming = false;
    bool broken = false;
    auto start = [&](const ApiResponse& r) {
      metrics_->Add("sinew_harness_http_requests_total", "code=\"" + std::to_string(r.status) + "\"");
      if (r.status != 200) {
        auto res = ToBeast(r, version, false);
        RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write(stream, res, h); });
        return;
      }
      http::response<http::empty_body> res{http::status::ok, version};
      res.set(http::field::content_type, "text/event-stream");
      res.set(http::field::cache_control, "no-cache");
      res.keep_alive(false);
      res.chunked(true);
      http::response_serializer<http::empty_body> sr{res};
      auto ec = RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { http::async_write_header(stream, sr, h); });
      streaming = !ec;
      broken = static_cast<bool>(ec);
    };
    auto write = [&](const std::string& chunk) {
      if (!streaming || broken) return false;
      auto ec = RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) {
        net::async_write(stream, http::make_chunk(net::buffer(chunk)), h);
      });
      if (ec) broken = true;
      return !broken;
    };
    try {
      handler_->Stream(api, start, write);
    } catch (const std::exception& e) {
      spdlog::error("event stream failed: {}", e.what());
    }
    if (streaming && !broken) {
      RunWithTimeout(ioc, stream, kWriteTimeout, [&](auto h) { net::async_write(stream, http::make_chunk_last(), h); });
    }
  }

  const HarnessConfig config_;
  ApiHandler* handler_;  // not owned
  Metrics* metrics_;     // not owned
  net::io_context accept_ioc_;
  tcp::acceptor acceptor_;
  std::string address_;
  std::thread accept_thread_;
  std::mutex mutex_;
  std::condition_variable idle_;
  bool stopped_ = false;     // guarded by mutex_
  uint32_t connections_ = 0;  // guarded by mutex_
  std::set<int> open_fds_;    // guarded by mutex_
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HarnessConfig& config, ApiHandler* handler,
                                                      Metrics* metrics) {
  auto server = std::make_unique<BeastServer>(config, handler, metrics);
  SINEW_RETURN_IF_ERROR(server->Bind());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace sinew::harness
