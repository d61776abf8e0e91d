// GrpcTlsOptions: the certificate files of one gRPC link's mTLS, without gRPC's headers
// (so that option structs can hold it). The functions that use it are in grpc_tls.h.
#pragma once

#include <chrono>
#include <string>

namespace sinew {

struct GrpcTlsOptions {
  // PEM certificate chain this process presents: a server's identity, or a client's.
  // Default: "" (no TLS)
  std::string cert_file;
  // PEM private key of cert_file. Default: ""
  std::string key_file;
  // PEM CA bundle that the peer's certificate must chain to: a server verifies client
  // certificates against it, a client the server's. Default: ""
  std::string ca_file;
  // How often the three files are checked for changes (gRPC's minimum is 1 s).
  // Default: 60 s
  std::chrono::seconds refresh_interval{60};
  // Clients only: the name the server's certificate must carry, instead of the host part
  // of the target (for a target given as an address the certificate does not list).
  // Default: "" (the target's host)
  std::string server_name_override;

  // Whether TLS is configured (any of the three files set; CheckGrpcTlsFiles then
  // requires all three).
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

}  // namespace sinew
