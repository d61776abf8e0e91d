// mTLS on the gRPC links between Sinew processes (docs/security.md, "Transport").
//
// Servers (sinew-store, sinew-sandboxd, sinew-model's gRPC port) present a certificate and
// require a client certificate signed by the configured CA; clients (the harness, the
// tools, the eval runner) check the server's certificate and name against that CA and
// present their own certificate. Every file is watched: a new certificate, key or CA
// written in place (one rename each, as scripts/make-certs.sh does) is used by the next
// handshake, without a restart. Connections already open keep the certificates they
// began with.
//
//   sinew::GrpcTlsOptions tls{.cert_file = "store.pem", .key_file = "store-key.pem",
//                             .ca_file = "ca.pem"};
//   auto creds = sinew::GrpcServerCredentials(tls);          // exit 2 when !creds.ok()
//   builder.AddListeningPort(listen, *creds, &port);
//
//   auto channel = sinew::GrpcChannel("127.0.0.1:7701", client_tls, args);
//
// With all three files empty both sides are plain TCP (grpc::Insecure*Credentials); a
// server may be plain only on a loopback address unless the operator said --insecure
// (CheckPlainGrpcOnlyOnLoopback), as for HTTP.
//
// Thread safety: the functions are safe to call from any thread; the credentials and
// channels they return are gRPC's own, usable from every thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew {


// Checks that the three files are all set, readable, PEM, that the key belongs to the
// certificate and that the CA file holds at least one certificate. The error names the
// file at fault. Ok for options with TLS off.
[[nodiscard]] Status CheckGrpcTlsFiles(const GrpcTlsOptions& tls);

// Server credentials: mTLS (client certificates required and verified against ca_file)
// when tls.enabled(), plain otherwise. Fails as CheckGrpcTlsFiles does.
[[nodiscard]] Result<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const GrpcTlsOptions& tls);

// Channel credentials: the server's chain checked against ca_file and its name against
// the target's host (or tls.server_name_override), this process's certificate presented;
// plain when !tls.enabled(). Fails as CheckGrpcTlsFiles does.
[[nodiscard]] Result<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(
    const GrpcTlsOptions& tls);

// A channel to `target` with GrpcChannelCredentials(tls) and `args` (plus the name
// override, when set). Fails as CheckGrpcTlsFiles does; connects lazily.
[[nodiscard]] Result<std::shared_ptr<grpc::Channel>> GrpcChannel(const std::string& target,
                                                                 const GrpcTlsOptions& tls,
                                                                 grpc::ChannelArguments args = {});

// Refuses a plain (no TLS) gRPC listener on anything but a loopback address
// (127.0.0.0/8, ::1, "localhost") unless `insecure`; `insecure_flag` names the switch in
// the message. `listen` is host:port, [v6]:port or host. Ok when `tls`.
[[nodiscard]] Status CheckPlainGrpcOnlyOnLoopback(const std::string& listen, bool tls,
                                                  bool insecure,
                                                  const std::string& insecure_flag);

}  // namespace sinew
