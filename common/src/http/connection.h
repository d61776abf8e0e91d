// One HTTP connection of the common server (server.cc accepts, connection.cc serves):
// what every connection shares with its server, and the stream-independent half of a
// connection (registration, flow control, hang-up). Internal to sinew_http.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sinew/http/server.h"

namespace sinew::http::internal {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;

class Connection;

// What connections share with the server; it outlives the server while a handler still
// holds a connection.
struct Shared {
  ServerOptions options;
  Handler handler;
  net::io_context ioc;
  std::mutex mutex;
  std::condition_variable idle;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> live;  // guarded by mutex

  std::string ErrorBody(int status, const std::string& code, const std::string& message) const {
    return options.error_body ? options.error_body(status, code, message) : DefaultErrorBody(status, code, message);
  }
};

// The stream-independent half of a connection: registration, flow control, hang-up.
class Connection : public ResponseStream, public std::enable_shared_from_this<Connection> {
 public:
  using ResponseStream::Send;
  explicit Connection(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  ~Connection() override {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->live.erase(this);
    if (shared_->live.empty()) shared_->idle.notify_all();
  }
  virtual void Begin(bool reject) = 0;
  // Closes the connection from any thread.
  virtual void CloseFromOutside() = 0;

  bool ClientConnected() const override { return !closed_.load(); }

  bool WaitForRoom(size_t max_queued_bytes) override {
    std::unique_lock<std::mutex> lock(flow_mutex_);
    bool room = flow_cv_.wait_for(lock, shared_->options.write_timeout, [&] {
      return closed_.load() || queued_bytes_ <= max_queued_bytes;
    });
    return room && !closed_.load();
  }

  void OnRoom(size_t max_queued_bytes, std::function<void(bool)> room) override {
    std::function<void(bool)> replaced;
    {
      std::lock_guard<std::mutex> lock(flow_mutex_);
      if (!closed_.load() && queued_bytes_ > max_queued_bytes) {
        replaced = std::move(room_waiter_);
        room_waiter_ = std::move(room);
        room_max_ = max_queued_bytes;
        room = nullptr;
      }
    }
    if (replaced) replaced(false);
    if (room) room(!closed_.load());
  }

 protected:
  void Queued(size_t bytes) {
    std::lock_guard<std::mutex> lock(flow_mutex_);
    queued_bytes_ += bytes;
  }
  void Written(size_t bytes) {
    std::function<void(bool)> room;
    {
      std::lock_guard<std::mutex> lock(flow_mutex_);
      queued_bytes_ -= std::min(bytes, queued_bytes_);
      if (room_waiter_ && queued_bytes_ <= room_max_) {
        room = std::move(room_waiter_);
        room_waiter_ = nullptr;
      }
    }
    flow_cv_.notify_all();
    if (room) room(true);
  }
  void MarkClosed() {
    closed_.store(true);
    std::function<void(bool)> room;
    {
      std::lock_guard<std::mutex> lock(flow_mutex_);
      room = std::move(room_waiter_);
      room_waiter_ = nullptr;
    }
    flow_cv_.notify_all();
    if (room) room(false);
  }

  std::shared_ptr<Shared> shared_;
  std::atomic<bool> closed_{false};

 private:
  std::mutex flow_mutex_;
  std::condition_variable flow_cv_;
  size_t queued_bytes_ = 0;  // guarded by flow_mutex_
  std::function<void(bool)> room_waiter_;  // OnRoom's; guarded by flow_mutex_
  size_t room_max_ = 0;                    // guarded by flow_mutex_
};

// A connection over the accepted `socket`: TLS when `tls` is set (the context is kept
// alive with it), plain TCP otherwise. Not registered yet; Begin starts it.
std::shared_ptr<Connection> MakeConnection(std::shared_ptr<Shared> shared, boost::asio::ip::tcp::socket socket,
                                           std::shared_ptr<boost::asio::ssl::context> tls);

}  // namespace sinew::http::internal
