#include "connection.h"

#include <sys/socket.h>

#include <array>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <deque>
#include <optional>
#include <sstream>

namespace sinew::http::internal {
namespace {

namespace beast = boost::beast;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// How long a closing connection waits for the client to finish sending (plain) or to
// answer close_notify (TLS), so that an error answer is not lost to a reset.
constexpr std::chrono::seconds kLingerTime{1};

std::string Lower(std::string_view in) {
  std::string out(in);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// One queued write, already in its wire form (serialized by Beast): a whole response, an
// event-stream head, a chunk, the last chunk, or a "100 Continue". Every write of a
// connection is then one kind of Asio operation, compiled once per stream type.
struct WriteItem {
  enum class Kind { kFull, kStreamHeader, kChunk, kLastChunk, kContinue } kind = Kind::kFull;
  std::shared_ptr<const std::string> wire;
  size_t bytes = 0;  // the payload it carries, as counted by Queued / Written
};

template <typename Message>
std::shared_ptr<const std::string> Wire(const Message& message) {
  std::ostringstream out;
  out << message;
  return std::make_shared<const std::string>(std::move(out).str());
}

template <typename ConstBufferSequence>
std::shared_ptr<const std::string> BufferWire(const ConstBufferSequence& buffers) {
  auto out = std::make_shared<std::string>(net::buffer_size(buffers), '\0');
  net::buffer_copy(net::buffer(*out), buffers);
  return out;
}

// One connection over `Stream` (beast::tcp_stream or ssl_stream of it). Lives as long as
// an async operation or a handler holds it; everything but the public ResponseStream
// calls runs on its strand.
template <typename Stream>
class Session final : public Connection {
 public:
  Session(std::shared_ptr<Shared> shared, Stream stream, std::shared_ptr<ssl::context> tls)
      : Connection(std::move(shared)), tls_(std::move(tls)), stream_(std::move(stream)) {}
  using ResponseStream::Send;

  void Begin(bool reject) override {
    reject_ = reject;
    net::dispatch(stream_.get_executor(), [self = Self()] { self->Handshake(); });
  }

  void CloseFromOutside() override {
    net::post(stream_.get_executor(), [self = Self()] { self->Close(); });
  }

  void Send(Response response) override {
    auto out = std::make_shared<bhttp::response<bhttp::string_body>>();
    out->version(11);
    out->result(static_cast<unsigned>(response.status));
    out->set(bhttp::field::server, shared_->options.server_name);
    out->set(bhttp::field::content_type, response.content_type);
    bool has_retry_after = false;
    for (auto& [name, value] : response.headers) {
      has_retry_after = has_retry_after || Lower(name) == "retry-after";
      out->set(name, value);
    }
    // Overload (429/503): tell the client when to come back.
    if ((response.status == 429 || response.status == 503) && !has_retry_after) out->set(bhttp::field::retry_after, "1");
    out->body() = std::move(response.body);
    Post([out](Session& self) {
      out->keep_alive(self.keep_alive_);
      out->prepare_payload();
      WriteItem item;
      item.kind = WriteItem::Kind::kFull;
      item.bytes = out->body().size();
      item.wire = Wire(*out);
      self.Enqueue(std::move(item));
    });
  }

  bool StartEvents(Headers extra_headers) override {
    Post([extra_headers = std::move(extra_headers)](Session& self) {
      bhttp::response<bhttp::empty_body> head(bhttp::status::ok, 11);
      head.set(bhttp::field::server, self.shared_->options.server_name);
      head.set(bhttp::field::content_type, "text/event-stream");
      head.set(bhttp::field::cache_control, "no-cache");
      for (const auto& [name, value] : extra_headers) head.set(name, value);
      head.keep_alive(self.keep_alive_);
      head.chunked(true);
      WriteItem item;
      item.kind = WriteItem::Kind::kStreamHeader;
      item.wire = Wire(head.base());  // the head alone: the chunks follow
      self.Enqueue(std::move(item));
    });
    return !closed_.load();
  }

  bool SendEvent(std::string data) override {
    auto chunk = std::make_shared<std::string>(std::move(data));
    Queued(chunk->size());
    Post([chunk](Session& self) {
      WriteItem item;
      item.kind = WriteItem::Kind::kChunk;
      item.wire = BufferWire(bhttp::make_chunk(net::buffer(*chunk)));
      item.bytes = chunk->size();
      self.Enqueue(std::move(item), /*counted=*/true);
    });
    return !closed_.load();
  }

  void EndEvents() override {
    Post([](Session& self) {
      WriteItem item;
      item.kind = WriteItem::Kind::kLastChunk;
      item.wire = BufferWire(bhttp::make_chunk_last());
      self.Enqueue(std::move(item));
    });
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  template <typename F>
  void Post(F action) {
    net::post(stream_.get_executor(), [self = Self(), action = std::move(action)] { action(*self); });
  }

  void Handshake() {
    if constexpr (kTls) {
      Tcp().expires_after(shared_->options.read_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = Self()](beast::error_code ec) {
        if (ec) {
          self->Close();  // not TLS, or a bad client hello: nothing can be said in HTTP
          return;
        }
        self->AfterHandshake();
      });
    } else {
      AfterHandshake();
    }
  }

  void AfterHandshake() {
    if (reject_) {
      keep_alive_ = false;
      Send(503, "application/json",
           shared_->ErrorBody(503, "unavailable", "too many open connections; retry later"));
      return;
    }
    DoRead();
  }

  void DoRead() {
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body_bytes);
    parser_->header_limit(shared_->options.max_header_bytes);
    Tcp().expires_after(shared_->options.read_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = Self()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // Answers "Expect: 100-continue" (libcurl sends it for bodies over 1 KiB) before
  // reading the body, so such clients do not wait for their own timeout.
  void OnHeader(beast::error_code ec) {
    if (ec) {
      OnRead(ec);
      return;
    }
    if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue") && parser_->get().version() == 11) {
      WriteItem item;  // the queue is empty: no request of this connection is answered yet
      item.kind = WriteItem::Kind::kContinue;
      item.wire = Wire(bhttp::response<bhttp::empty_body>(bhttp::status::continue_, 11).base());
      Enqueue(std::move(item));
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    Tcp().expires_after(shared_->options.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_, [self = Self()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  // Answers a request the server refuses by itself, then closes.
  void Refuse(int status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    Send(status, "application/json", shared_->ErrorBody(status, code, message));
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      if (ec == bhttp::error::body_limit) {
        Refuse(413, "payload_too_large",
               "the request body is larger than the server accepts (" +
                   std::to_string(shared_->options.max_body_bytes) + " bytes)");
      } else if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
        Refuse(431, "headers_too_large",
               "the request headers are larger than the server accepts (" +
                   std::to_string(shared_->options.max_header_bytes) + " bytes)");
      } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
                 ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
        // Malformed: say so once; the stream position cannot be trusted any more.
        Refuse(400, "bad_request", "malformed HTTP request: " + ec.message());
      } else {
        Close();  // closed, reset or timed out: nobody to answer
      }
      return;
    }
    bhttp::request<bhttp::string_body>& in = parser_->get();
    if (in.version() != 10 && in.version() != 11) {
      Refuse(400, "bad_request",
             "HTTP version " + std::to_string(in.version() / 10) + "." + std::to_string(in.version() % 10) +
                 " is not supported (use HTTP/1.1)");
      return;
    }
    keep_alive_ = in.keep_alive();
    Request request;
    request.method = std::string(in.method_string());
    request.target = std::string(in.target());
    request.content_type = std::string(in[bhttp::field::content_type]);
    for (const auto& field : in) request.headers.emplace_back(Lower(field.name_string()), std::string(field.value()));
    request.body = std::move(in.body());
    beast::error_code peer_ec;
    auto remote = Tcp().socket().remote_endpoint(peer_ec);
    if (!peer_ec) request.peer = remote.address().to_string() + ":" + std::to_string(remote.port());
    Tcp().expires_never();
    WatchForHangUp();
    try {
      shared_->handler(std::move(request), Self());
    } catch (const std::exception& error) {  // request boundary: never let it end the I/O thread
      keep_alive_ = false;
      Send(500, "application/json", shared_->ErrorBody(500, "internal", std::string("internal error: ") + error.what()));
    }
  }

  // While a request is being answered, notices the client closing its side, so that work
  // nobody will read can stop. Pipelined bytes stay for the next read.
  void WatchForHangUp() {
    Tcp().socket().async_wait(tcp::socket::wait_read, [self = Self()](beast::error_code ec) {
      if (ec) return;
      char byte;
      ssize_t n = ::recv(self->Tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) self->MarkClosed();
    });
  }

  void Enqueue(WriteItem item, bool counted = false) {
    if (closed_.load()) {
      if (counted) Written(item.bytes);
      return;
    }
    if (!counted) Queued(item.bytes);
    queue_.push_back(std::move(item));
    MaybeWrite();
  }

  void MaybeWrite() {
    if (writing_ || queue_.empty()) return;
    writing_ = true;
    WriteItem& item = queue_.front();
    Tcp().expires_after(shared_->options.write_timeout);
    net::async_write(stream_, net::buffer(*item.wire),
                     [self = Self(), wire = item.wire](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    if (ec) {
      for (const WriteItem& item : queue_) Written(item.bytes);
      queue_.clear();
      Close();
      return;
    }
    WriteItem::Kind kind = queue_.front().kind;
    Written(queue_.front().bytes);
    queue_.pop_front();
    if (kind == WriteItem::Kind::kContinue) {
      ReadBody();
      return;
    }
    if (kind == WriteItem::Kind::kFull || kind == WriteItem::Kind::kLastChunk) {
      if (!keep_alive_) {
        Linger();
        return;
      }
      DoRead();
    }
    MaybeWrite();
  }

  // Ends a connection after its last answer without losing that answer to a reset: TLS
  // sends close_notify; plain TCP half-closes and drains what the client still sends.
  void Linger() {
    MarkClosed();
    Tcp().expires_after(kLingerTime);
    if constexpr (kTls) {
      stream_.async_shutdown([self = Self()](beast::error_code) { self->Close(); });
    } else {
      beast::error_code ignored;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Drain();
    }
  }

  void Drain() {
    Tcp().async_read_some(net::buffer(drain_buffer_), [self = Self()](beast::error_code ec, size_t) {
      if (ec) {
        self->Close();
        return;
      }
      self->Drain();
    });
  }

  void Close() {
    MarkClosed();
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().socket().close(ignored);
  }

  std::shared_ptr<ssl::context> tls_;  // kept alive for stream_ (TLS only)
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::deque<WriteItem> queue_;
  std::array<char, 4096> drain_buffer_{};
  bool writing_ = false;
  bool keep_alive_ = true;
  bool reject_ = false;
};

}  // namespace

std::shared_ptr<Connection> MakeConnection(std::shared_ptr<Shared> shared, tcp::socket socket,
                                           std::shared_ptr<ssl::context> tls) {
  if (tls) {
    return std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        std::move(shared), beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
        std::move(tls));
  }
  return std::make_shared<Session<beast::tcp_stream>>(std::move(shared), beast::tcp_stream(std::move(socket)),
                                                      nullptr);
}

}  // namespace sinew::http::internal
