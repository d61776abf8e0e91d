#include "sinew/http/server.h"

#include "connection.h"
#include "tls_files.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <boost/json.hpp>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

namespace sinew::http {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using internal::Connection;
using internal::Shared;

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, Handler handler)
      : shared_(std::make_shared<Shared>()),
        control_(net::make_strand(shared_->ioc)),
        acceptor_(control_),
        watch_timer_(control_),
        sighup_(control_) {
    shared_->options = options;
    shared_->handler = std::move(handler);
  }

  ~ServerImpl() override { Stop(); }
  using Server::Stop;

  Status Listen() {
    const ServerOptions& options = shared_->options;
    if (options.tls.enabled()) SINEW_RETURN_IF_ERROR(LoadTls());
    beast::error_code ec;
    net::ip::address ip = net::ip::make_address(options.host, ec);
    if (ec) return Status::InvalidArgument("listen host \"" + options.host + "\" is not an IP address");
    tcp::endpoint endpoint(ip, options.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                                 ec.message());
    }
    auto local = acceptor_.local_endpoint();
    port_ = local.port();
    address_ = (ip.is_v6() ? "[" + local.address().to_string() + "]" : local.address().to_string()) + ":" +
               std::to_string(port_);
    DoAccept();
    if (options.tls.enabled()) {
      WatchTlsFiles();
      sighup_.add(SIGHUP);
      WaitForSighup();
    }
    work_.emplace(shared_->ioc.get_executor());
    for (int i = 0; i < std::max(1, options.io_threads); ++i) threads_.emplace_back([this] { shared_->ioc.run(); });
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }
  std::string address() const override { return address_; }

  Status ReloadTls() override {
    if (!shared_->options.tls.enabled()) return Status::FailedPrecondition("this server does not serve TLS");
    return LoadTls();
  }

  uint64_t tls_generation() const override { return tls_generation_.load(); }

  void Stop(std::chrono::milliseconds drain) override {
    if (stopped_.exchange(true)) return;
    net::post(control_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      watch_timer_.cancel();
      sighup_.cancel(ignored);
    });
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      for (auto& [raw, weak] : shared_->live)
        if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
    for (auto& connection : open) connection->CloseFromOutside();
    open.clear();
    {
      std::unique_lock<std::mutex> lock(shared_->mutex);
      if (!shared_->idle.wait_for(lock, drain, [&] { return shared_->live.empty(); }))
        spdlog::warn("http server: {} connection(s) still held by handlers after {} ms; stopping anyway",
                     shared_->live.size(), drain.count());
    }
    work_.reset();
    shared_->ioc.stop();
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  Status LoadTls() {
    const TlsOptions& tls = shared_->options.tls;
    FileStamp cert = Stamp(tls.cert_file), key = Stamp(tls.key_file);
    auto context = LoadTlsContext(tls);
    std::lock_guard<std::mutex> lock(tls_mutex_);
    seen_cert_ = cert;
    seen_key_ = key;
    if (!context.ok()) return context.status();
    tls_context_ = std::move(*context);
    tls_generation_.fetch_add(1);
    return Status::Ok();
  }

  std::shared_ptr<ssl::context> CurrentTls() {
    std::lock_guard<std::mutex> lock(tls_mutex_);
    return tls_context_;
  }

  void WatchTlsFiles() {
    const auto interval = shared_->options.tls.watch_interval;
    if (interval.count() <= 0) return;
    watch_timer_.expires_after(interval);
    watch_timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      const TlsOptions& tls = shared_->options.tls;
      bool changed;
      {
        std::lock_guard<std::mutex> lock(tls_mutex_);
        changed = !(Stamp(tls.cert_file) == seen_cert_) || !(Stamp(tls.key_file) == seen_key_);
      }
      if (changed) Reload("the certificate files changed");
      WatchTlsFiles();
    });
  }

  void WaitForSighup() {
    sighup_.async_wait([this](beast::error_code ec, int) {
      if (ec) return;
      Reload("SIGHUP");
      WaitForSighup();
    });
  }

  void Reload(const char* why) {
    Status status = LoadTls();
    if (status.ok()) {
      spdlog::info("http server {}: TLS certificate reloaded ({})", address_, why);
    } else {
      spdlog::warn("http server {}: TLS reload ({}) failed, keeping the previous certificate: {}", address_, why,
                   status.message());
    }
  }

  void DoAccept() {
    acceptor_.async_accept(net::make_strand(shared_->ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) Admit(std::move(socket));
      if (acceptor_.is_open()) DoAccept();
    });
  }

  void Admit(tcp::socket socket) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::shared_ptr<Connection> connection = internal::MakeConnection(shared_, std::move(socket), CurrentTls());
    bool reject;
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      reject = shared_->options.max_connections > 0 && shared_->live.size() >= shared_->options.max_connections;
      shared_->live.emplace(connection.get(), connection);
    }
    connection->Begin(reject);
  }

  std::shared_ptr<Shared> shared_;
  // The acceptor, the TLS watch timer and the SIGHUP set are not thread-safe and the
  // I/O threads are many: their handlers and Stop's close all run on this strand.
  net::strand<net::io_context::executor_type> control_;
  tcp::acceptor acceptor_;
  net::steady_timer watch_timer_;
  net::signal_set sighup_;
  // Keeps the I/O threads running while connections drain after the acceptor closed.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::string address_;
  std::atomic<bool> stopped_{false};
  std::mutex tls_mutex_;
  std::shared_ptr<ssl::context> tls_context_;  // guarded by tls_mutex_
  FileStamp seen_cert_, seen_key_;             // guarded by tls_mutex_
  std::atomic<uint64_t> tls_generation_{0};
};

}  // namespace

std::string_view Request::Header(std::string_view lower_case_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_case_name) return value;
  return {};
}

std::string DefaultErrorBody(int /*status*/, const std::string& code, const std::string& message) {
  boost::json::object error{{"code", code}, {"message", message}};
  return boost::json::serialize(boost::json::object{{"error", std::move(error)}});
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Handler handler) {
  auto server = std::make_unique<ServerImpl>(options, std::move(handler));
  SINEW_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace sinew::http
