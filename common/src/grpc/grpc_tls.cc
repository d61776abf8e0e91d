#include "sinew/grpc_tls.h"

#include <arpa/inet.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sinew {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using UniqueFile = std::unique_ptr<FILE, FileCloser>;
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

Result<UniqueFile> Open(const std::string& path, const std::string& what) {
  UniqueFile file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    return Status::InvalidArgument("cannot read the gRPC TLS " + what + " " + path + ": " +
                                   std::strerror(errno));
  }
  return file;
}

Result<std::unique_ptr<X509, X509Free>> ReadCertificate(const std::string& path,
                                                        const std::string& what) {
  SINEW_ASSIGN_OR_RETURN(UniqueFile file, Open(path, what));
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(file.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) return Status::InvalidArgument("the gRPC TLS " + what + " " + path + " holds no PEM certificate");
  return cert;
}

// "host" of "host:port", "[v6]:port" or a bare host.
std::string HostOf(const std::string& listen) {
  if (!listen.empty() && listen.front() == '[') {
    const auto end = listen.find(']');
    return end == std::string::npos ? listen : listen.substr(1, end - 1);
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || listen.find(':') != colon) return listen;  // bare v6 or host
  return listen.substr(0, colon);
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> Watcher(const GrpcTlsOptions& tls) {
  const auto seconds = std::max<int64_t>(1, tls.refresh_interval.count());
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.ca_file, static_cast<unsigned int>(seconds));
}

}  // namespace

Status CheckGrpcTlsFiles(const GrpcTlsOptions& tls) {
  if (!tls.enabled()) return Status::Ok();
  if (tls.cert_file.empty() || tls.key_file.empty() || tls.ca_file.empty()) {
    return Status::InvalidArgument(
        "gRPC TLS needs a certificate, its key and a CA file together (certificate '" +
        tls.cert_file + "', key '" + tls.key_file + "', CA '" + tls.ca_file + "')");
  }
  SINEW_ASSIGN_OR_RETURN(auto cert, ReadCertificate(tls.cert_file, "certificate"));
  {
    SINEW_ASSIGN_OR_RETURN(UniqueFile file, Open(tls.key_file, "key"));
    std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_PrivateKey(file.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    if (!key) return Status::InvalidArgument("the gRPC TLS key " + tls.key_file + " holds no PEM private key");
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
      ERR_clear_error();
      return Status::InvalidArgument("the gRPC TLS key " + tls.key_file +
                                     " does not match the certificate " + tls.cert_file);
    }
  }
  SINEW_ASSIGN_OR_RETURN(auto ca, ReadCertificate(tls.ca_file, "CA file"));
  return Status::Ok();
}

Result<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const GrpcTlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  SINEW_RETURN_IF_ERROR(CheckGrpcTlsFiles(tls));
  grpc::experimental::TlsServerCredentialsOptions options(Watcher(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto creds = grpc::experimental::TlsServerCredentials(options);
  if (!creds) return Status::Internal("gRPC refused the TLS server options");
  return creds;
}

Result<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(const GrpcTlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  SINEW_RETURN_IF_ERROR(CheckGrpcTlsFiles(tls));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Watcher(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  auto creds = grpc::experimental::TlsCredentials(options);
  if (!creds) return Status::Internal("gRPC refused the TLS channel options");
  return creds;
}

Result<std::shared_ptr<grpc::Channel>> GrpcChannel(const std::string& target, const GrpcTlsOptions& tls,
                                                   grpc::ChannelArguments args) {
  SINEW_ASSIGN_OR_RETURN(auto creds, GrpcChannelCredentials(tls));
  if (tls.enabled() && !tls.server_name_override.empty()) {
    args.SetSslTargetNameOverride(tls.server_name_override);
  }
  return grpc::CreateCustomChannel(target, creds, args);
}

Status CheckPlainGrpcOnlyOnLoopback(const std::string& listen, bool tls, bool insecure,
                                    const std::string& insecure_flag) {
  if (tls || insecure) return Status::Ok();
  const std::string host = HostOf(listen);
  if (IsLoopback(host)) return Status::Ok();
  return Status::InvalidArgument("refusing to serve plain gRPC on " + listen +
                                 ", which is not a loopback address: configure mTLS "
                                 "(certificate, key and CA), or accept it with " + insecure_flag);
}

}  // namespace sinew
