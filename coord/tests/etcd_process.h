// A real etcd for a test: its own temporary data directory and loopback ports. Can be
// killed and started again on the same ports and data (an etcd restart). For tests and
// benchmarks only (setup failures leave `endpoint` empty rather than returning Status).
#pragma once

#include <memory>
#include <string>

#include "sinew/testing/subprocess.h"

namespace sinew::coord::test {

// Path of the etcd binary ($SINEW_ETCD, or etcd from PATH); "" when there is none.
std::string EtcdBinary();

class EtcdProcess {
 public:
  EtcdProcess();  // starts it and waits until it answers
  ~EtcdProcess();
  // "127.0.0.1:PORT"; empty when etcd is missing or did not start.
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
  std::unique_ptr<sinew::testing::Subprocess> proc_;
};

}  // namespace sinew::coord::test
