// A TCP proxy on loopback that a test can cut off, for network partitions without
// iptables: while cut, it forwards nothing in either direction and holds every
// connection open (the peers see silence, as when packets are dropped); healed, it closes
// the connections it held (as their timeouts would) and forwards new ones again.
// For tests only (setup failures abort).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace sinew::store::test {

class TcpProxy {
 public:
  // Forwards to `target` ("127.0.0.1:PORT").
  explicit TcpProxy(const std::string& target) : target_port_(std::atoi(target.substr(target.rfind(':') + 1).c_str())) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 64) != 0) {
      std::abort();
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~TcpProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : pumps_) t.join();
    ::close(listen_fd_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // Where to connect instead of the target.
  const std::string& address() const { return address_; }
  void Cut() { cut_ = true; }
  void Heal() {
    ++generation_;  // connections from before end
    cut_ = false;
  }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      pumps_.emplace_back([this, client, generation = generation_.load()] { Pump(client, generation); });
    }
  }
  int Connect() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  // Forwards between `client` and a connection to the target while not cut, until either
  // side closes, the proxy stops, or a heal ends this connection's generation.
  void Pump(int client, int generation) {
    int server = -1;
    char buf[16384];
    while (!stop_ && generation_ == generation) {
      if (cut_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (server < 0 && (server = Connect()) < 0) break;
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0 || cut_) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        closed = n <= 0 || !WriteAll(i == 0 ? server : client, buf, static_cast<size_t>(n));
      }
      if (closed) break;
    }
    ::close(client);
    if (server >= 0) ::close(server);
  }
  static bool WriteAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  const int target_port_;
  int listen_fd_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::atomic<int> generation_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::list<std::thread> pumps_;  // guarded by mu_
};

}  // namespace sinew::store::test
