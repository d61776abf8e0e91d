#include "http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cerrno>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "openai_response.h"

namespace sinew::model {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr uint32_t kHeaderLimit = 16 * 1024;

// One queued write of a response: a whole response, an SSE header, a chunk or the end.
struct WriteItem {
  enum class Kind { kFull, kStreamHeader, kChunk, kLastChunk } kind = Kind::kFull;
  std::shared_ptr<http::response<http::string_body>> full;
  std::shared_ptr<http::response<http::empty_body>> header;
  std::shared_ptr<http::response_serializer<http::empty_body>> header_serializer;
  std::shared_ptr<std::string> chunk;
};

// One connection. Lives as long as an async operation or a pending request holds it.
class HttpSession final : public ResponseStream, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler)
      : stream_(std::move(socket)), options_(options), handler_(handler) {}

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }

  void Send(int status, std::string content_type, std::string body) override {
    auto response = std::make_shared<http::response<http::string_body>>();
    response->version(11);
    response->result(static_cast<http::status>(status));
    response->set(http::field::server, "sinew-model");
    response->set(http::field::content_type, content_type);
    // Overload (429/503): tell the client when to come back instead of queueing it.
    if (status == 429 || status == 503) response->set(http::field::retry_after, "1");
    response->body() = std::move(body);
    Post([response](HttpSession& self) {
      response->keep_alive(self.keep_alive_);
      response->prepare_payload();
      WriteItem item;
      item.kind = WriteItem::Kind::kFull;
      item.full = response;
      self.Enqueue(std::move(item));
    });
  }

  bool StartEvents() override {
    Post([](HttpSession& self) {
      WriteItem item;
      item.kind = WriteItem::Kind::kStreamHeader;
      item.header = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
      item.header->set(http::field::server, "sinew-model");
      item.header->set(http::field::content_type, "text/event-stream");
      item.header->set(http::field::cache_control, "no-cache");
      item.header->keep_alive(self.keep_alive_);
      item.header->chunked(true);
      item.header_serializer =
          std::make_shared<http::response_serializer<http::empty_body>>(*item.header);
      self.Enqueue(std::move(item));
    });
    return !closed_.load();
  }

  bool SendEvent(std::string data) override {
    auto chunk = std::make_shared<std::string>(std::move(data));
    Post([chunk](HttpSession& self) {
      WriteItem item;
      item.kind = WriteItem::Kind::kChunk;
      item.chunk = chunk;
      self.Enqueue(std::move(item));
    });
    return !closed_.load();
  }

  bool ClientConnected() const override { return !closed_.load(); }

  void EndEvents() override {
    Post([](HttpSession& self) {
      WriteItem item;
      item.kind = WriteItem::Kind::kLastChunk;
      self.Enqueue(std::move(item));
    });
  }

 private:
  template <typename F>
  void Post(F action) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), action = std::move(action)] { action(*self); });
  }

  void DoRead() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(kHeaderLimit);
    stream_.expires_after(options_.read_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&HttpSession::OnHeader, shared_from_this()));
  }

  // Answers "Expect: 100-continue" (sent by libcurl for bodies over 1 KiB) before reading
  // the body, so such clients do not wait for their own timeout.
  void OnHeader(beast::error_code ec, size_t bytes) {
    if (ec) {
      OnRead(ec, bytes);
      return;
    }
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       beast::bind_front_handler(&HttpSession::OnRead, self));
    };
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      auto interim =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(
          stream_, *interim,
          [self = shared_from_this(), interim, read_body](beast::error_code write_ec, size_t) {
            if (write_ec) {
              self->Close();
              return;
            }
            read_body();
          });
      return;
    }
    read_body();
  }

  void OnRead(beast::error_code ec, size_t /*bytes*/) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == net::error::eof) {
      Close();
      return;
    }
    if (ec) {
      // Malformed or oversized: answer, then close (the stream position is lost).
      keep_alive_ = false;
      bool too_large = ec == http::error::body_limit || ec == http::error::header_limit ||
                       ec == http::error::buffer_overflow;
      std::string message = too_large
                                ? "the request is larger than the server accepts (body limit " +
                                      std::to_string(options_.max_body_bytes) + " bytes)"
                                : "malformed HTTP request: " + ec.message();
      Send(400, "application/json",
           ErrorBody(message, "invalid_request_error",
                     too_large ? "request_too_large" : "bad_request"));
      return;
    }
    http::request<http::string_body>& request = parser_->get();
    keep_alive_ = request.keep_alive();
    HttpRequest out;
    out.method = std::string(request.method_string());
    out.target = std::string(request.target());
    out.content_type = std::string(request[http::field::content_type]);
    out.body = std::move(request.body());
    stream_.expires_never();
    WatchForHangUp();
    try {
      handler_(std::move(out), shared_from_this());
    } catch (const std::exception& error) {  // request boundary: never let it end the I/O thread
      keep_alive_ = false;
      Send(500, "application/json",
           ErrorBody(std::string("internal error: ") + error.what(), "server_error",
                     "internal_error"));
    }
  }

  // While a request is being answered, notices the client closing its side, so that a
  // generation nobody will read is cancelled. Pipelined bytes are left for the next read.
  void WatchForHangUp() {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          if (ec) return;
          char byte;
          ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            self->closed_.store(true);
        });
  }

  void Enqueue(WriteItem item) {
    if (closed_.load()) return;
    queue_.push_back(std::move(item));
    MaybeWrite();
  }

  void MaybeWrite() {
    if (writing_ || queue_.empty()) return;
    writing_ = true;
    WriteItem& item = queue_.front();
    stream_.expires_after(options_.write_timeout);
    auto done = beast::bind_front_handler(&HttpSession::OnWrite, shared_from_this());
    switch (item.kind) {
      case WriteItem::Kind::kFull:
        http::async_write(stream_, *item.full, std::move(done));
        break;
      case WriteItem::Kind::kStreamHeader:
        http::async_write_header(stream_, *item.header_serializer, std::move(done));
        break;
      case WriteItem::Kind::kChunk:
        net::async_write(stream_, http::make_chunk(net::buffer(*item.chunk)), std::move(done));
        break;
      case WriteItem::Kind::kLastChunk:
        net::async_write(stream_, http::make_chunk_last(), std::move(done));
        break;
    }
  }

  void OnWrite(beast::error_code ec, size_t /*bytes*/) {
    writing_ = false;
    if (ec) {
      queue_.clear();
      Close();
      return;
    }
    WriteItem::Kind kind = queue_.front().kind;
    queue_.pop_front();
    if (kind == WriteItem::Kind::kFull || kind == WriteItem::Kind::kLastChunk) {
      if (!keep_alive_) {
        Close();
        return;
      }
      DoRead();
    }
    MaybeWrite();
  }

  void Close() {
    closed_.store(true);
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  // Used only on the strand.
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<WriteItem> queue_;
  bool writing_ = false;
  bool keep_alive_ = true;
  // Read from any thread.
  std::atomic<bool> closed_{false};
  // Constant, owned by the server (which outlives every session's I/O).
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options), handler_(std::move(handler)), acceptor_(ioc_) {}

  ~HttpServerImpl() override { Stop(); }

  Status Listen() {
    beast::error_code ec;
    net::ip::address address = net::ip::make_address(options_.host, ec);
    if (ec) return Status::InvalidArgument("--host \"" + options_.host + "\" is not an IP address");
    tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    DoAccept();
    int threads = std::max(1, options_.io_threads);
    for (int index = 0; index < threads; ++index) threads_.emplace_back([this] { ioc_.run(); });
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    net::post(ioc_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    ioc_.stop();
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  void DoAccept() {
    acceptor_.async_accept(
        net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
          if (!ec) std::make_shared<HttpSession>(std::move(socket), options_, handler_)->Start();
          if (acceptor_.is_open()) DoAccept();
        });
  }

  const HttpServerOptions options_;
  const HttpHandler handler_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  auto server = std::make_unique<HttpServerImpl>(options, std::move(handler));
  SINEW_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace sinew::model
