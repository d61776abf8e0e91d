#include "tls_files.h"

namespace sinew::http {

namespace ssl = boost::asio::ssl;
namespace net = boost::asio;
using beast_error = boost::system::error_code;

FileStamp Stamp(const std::string& path) {
  FileStamp stamp;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    stamp.mtime = st.st_mtim;
    stamp.size = st.st_size;
    stamp.inode = st.st_ino;
  }
  return stamp;
}

Result<std::shared_ptr<ssl::context>> LoadTlsContext(const TlsOptions& tls) {
  if (tls.cert_file.empty() || tls.key_file.empty())
    return Status::InvalidArgument("TLS needs both a certificate file and a key file");
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  boost::system::error_code ec;
  context->use_certificate_chain_file(tls.cert_file, ec);
  if (ec) return Status::InvalidArgument("cannot load the TLS certificate " + tls.cert_file + ": " + ec.message());
  context->use_private_key_file(tls.key_file, ssl::context::pem, ec);
  if (ec) {
    return Status::InvalidArgument("cannot load the TLS key " + tls.key_file + " (it must be the PEM key of " +
                                   tls.cert_file + "): " + ec.message());
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1)
    return Status::InvalidArgument("the TLS key " + tls.key_file + " does not match the certificate " + tls.cert_file);
  return context;
}

Status CheckPlainOnlyOnLoopback(const std::string& host, bool tls, bool insecure, const std::string& insecure_flag) {
  if (tls || insecure) return Status::Ok();
  beast_error ec;
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  const net::ip::address ip = net::ip::make_address(bare, ec);
  if (ec) return Status::Ok();  // not an address: the listener reports it
  if (ip.is_loopback()) return Status::Ok();
  return Status::InvalidArgument("refusing to serve plain HTTP on " + host +
                                 ", which is not a loopback address: configure TLS, or accept it with " +
                                 insecure_flag);
}

}  // namespace sinew::http
