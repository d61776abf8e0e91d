// The server's TLS files: loading a certificate and key into a context, and noticing
// when the files change (common/src/http/server.cc reloads them). CheckPlainOnlyOnLoopback
// (declared in sinew/http/server.h) is defined here with them.
#pragma once

#include <sys/stat.h>

#include <boost/asio/ssl.hpp>
#include <memory>
#include <string>

#include "sinew/http/server.h"

namespace sinew::http {

// A file as last seen (modification time, size, inode), to notice a change.
struct FileStamp {
  struct timespec mtime {};
  off_t size = -1;
  ino_t inode = 0;
  bool operator==(const FileStamp& o) const {
    return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size &&
           inode == o.inode;
  }
};

// The stamp of `path` now; the default stamp when it cannot be read.
FileStamp Stamp(const std::string& path);

// A TLS 1.2+ server context over `tls`'s certificate chain and key. Errors:
// InvalidArgument naming the file that cannot be read or the key that does not match.
[[nodiscard]] Result<std::shared_ptr<boost::asio::ssl::context>> LoadTlsContext(const TlsOptions& tls);

}  // namespace sinew::http
