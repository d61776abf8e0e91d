// The command-line flags of GrpcTlsOptions, the same in every Sinew binary that serves or
// dials gRPC (docs/security.md): PREFIX-cert, PREFIX-key, PREFIX-ca,
// PREFIX-refresh-seconds and, for clients, PREFIX-server-name. The prefix is "--tls" in
// sinew-store and sinew-sandboxd; a binary that dials several services names each
// ("--store-tls" gives --store-tls-cert ...).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "sinew/grpc_tls_options.h"

namespace sinew {

// Adds the flags to `app`, writing into `*tls`, which must outlive the parse.
inline void AddGrpcTlsFlags(CLI::App& app, GrpcTlsOptions* tls, bool client,
                            const std::string& prefix = "--tls") {
  const std::string whose = client ? "this client's" : "this server's";
  app.add_option(prefix + "-cert", tls->cert_file,
                 "gRPC mTLS: PEM certificate chain, " + whose + " identity (watched for changes)");
  app.add_option(prefix + "-key", tls->key_file, "gRPC mTLS: PEM private key of " + prefix + "-cert");
  app.add_option(prefix + "-ca", tls->ca_file,
                 client ? "gRPC mTLS: PEM CA bundle the server's certificate must chain to"
                        : "gRPC mTLS: PEM CA bundle client certificates must chain to");
  app.add_option_function<int64_t>(
         prefix + "-refresh-seconds",
         [tls](const int64_t& seconds) { tls->refresh_interval = std::chrono::seconds(seconds); },
         "gRPC mTLS: how often the three files are checked for changes (default 60)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  if (client) {
    app.add_option(prefix + "-server-name", tls->server_name_override,
                   "gRPC mTLS: the name the server's certificate must carry (default: the address's host)");
  }
}

}  // namespace sinew
