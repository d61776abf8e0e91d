// A real etcd for a test: its own temporary data directory and loopback ports. Can be
// killed and started again on the same ports and data (an etcd restart). For tests and
// benchmarks only (setup failures leave `endpoint` empty rather than returning Status).
#pragma once

#include <memory>
#include <string>

#include "sinew/grpc_tls_options.h"
#include "sinew/testing/subprocess.h"

namespace sinew::coord::test {

// Path of the etcd binary ($SINEW_ETCD, or etcd from PATH); "" when there is none.
std::string EtcdBinary();

// TLS for a test etcd: it serves only https and requires client certificates that chain
// to server.ca_file (--client-cert-auth); `client` is what the readiness probe presents.
struct EtcdTls {
  GrpcTlsOptions server;  // cert_file, key_file: etcd's; ca_file: the clients' CA
  GrpcTlsOptions client;
};

class EtcdProcess {
 public:
  EtcdProcess();  // starts it and waits until it answers
  explicit EtcdProcess(EtcdTls tls);
  // Serves clients on `host` (an IPv4 address of this network namespace) instead of
  // 127.0.0.1, for members in other namespaces.
  EtcdProcess(EtcdTls tls, std::string host);
  ~EtcdProcess();
  // "HOST:PORT" (127.0.0.1 unless given); empty when etcd is missing or did not start.
  const std::string& endpoint() const { return endpoint_; }
  // SIGKILLs etcd (no clean shutdown).
  void Kill();
  // Starts it again on the same ports and data directory; true once it answers.
  bool Start();

 private:
  sinew::testing::TempDir dir_{"sinew-etcd"};
  int client_port_ = 0;
  int peer_port_ = 0;
  std::string endpoint_;
  EtcdTls tls_;
  std::string host_ = "127.0.0.1";
  std::unique_ptr<sinew::testing::Subprocess> proc_;
};

}  // namespace sinew::coord::test
