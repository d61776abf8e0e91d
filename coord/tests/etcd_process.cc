#include "etcd_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "sinew/coord/etcd_client.h"

namespace sinew::coord::test {
namespace {

// True when something accepts TCP connections on host:port.
bool Accepts(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return false;
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::string EtcdBinary() {
  if (const char* e = std::getenv("SINEW_ETCD"); e != nullptr && *e != '\0') return e;
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

EtcdProcess::EtcdProcess() : EtcdProcess(EtcdTls{}) {}

EtcdProcess::EtcdProcess(EtcdTls tls) : EtcdProcess(std::move(tls), "127.0.0.1") {}

EtcdProcess::EtcdProcess(EtcdTls tls, std::string host) : tls_(std::move(tls)), host_(std::move(host)) {
  client_port_ = sinew::testing::FreeLoopbackPort();
  peer_port_ = sinew::testing::FreeLoopbackPort();
  if (!Start()) endpoint_.clear();
}

EtcdProcess::~EtcdProcess() { Kill(); }

void EtcdProcess::Kill() {
  if (proc_ && proc_->running()) {
    proc_->Signal(SIGKILL);
    proc_->Wait();
  }
  proc_.reset();
}

bool EtcdProcess::Start() {
  const std::string bin = EtcdBinary();
  if (bin.empty()) return false;
  const bool tls = tls_.server.enabled();
  const std::string client = (tls ? "https://" : "http://") + host_ + ":" + std::to_string(client_port_);
  const std::string peer = "http://" + host_ + ":" + std::to_string(peer_port_);
  std::vector<std::string> args = {
      bin, "--name", "sinew-test", "--data-dir", dir_.Sub("data"), "--listen-client-urls", client,
      "--advertise-client-urls", client, "--listen-peer-urls", peer,
      "--initial-advertise-peer-urls", peer, "--initial-cluster", "sinew-test=" + peer, "--logger",
      "zap", "--log-level", "error"};
  if (tls) {
    args.insert(args.end(), {"--cert-file", tls_.server.cert_file, "--key-file", tls_.server.key_file,
                             "--trusted-ca-file", tls_.server.ca_file, "--client-cert-auth"});
  }
  proc_ = std::make_unique<sinew::testing::Subprocess>(args);
  endpoint_ = host_ + ":" + std::to_string(client_port_);
  // Wait for the port first: a gRPC channel that found it closed backs off for a while.
  const auto listen_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Accepts(host_, client_port_) && std::chrono::steady_clock::now() < listen_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto etcd = EtcdClient::Connect(endpoint_, std::chrono::seconds(1), tls_.client);
  if (!etcd.ok()) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if ((*etcd)->GetPrefix("/").ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace sinew::coord::test
