#include "agent/file_transfer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "agent/beneath.h"
#include "agent/tool_input.h"

namespace sinew::sandbox {
namespace {

// Path refusals are the caller's bad input, not a denial of who it is.
Status AsRefusal(Status s) {
  if (s.code() == StatusCode::kPermissionDenied) return Status::InvalidArgument(s.message());
  return s;
}

Result<std::filesystem::path> Resolve(const ToolConfig& config, const std::string& raw) {
  auto path = ResolvePath(config, raw, true);
  if (path.ok()) return path;
  if (path.status().code() != StatusCode::kPermissionDenied) return path.status();
  return Status::InvalidArgument("path '" + raw + "' is outside the workspace " +
                                 config.workspace.lexically_normal().string() +
                                 " (lexically or through a symbolic link); files move only below it");
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Update(std::string_view data) { EVP_DigestUpdate(ctx_.get(), data.data(), data.size()); }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &len);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

Status SendFile(const ToolConfig& config, const std::string& raw_path, uint64_t max_bytes,
                const std::function<bool(const v1::FileChunk&)>& send) {
  if (max_bytes == 0 || max_bytes > config.max_transfer_bytes) max_bytes = config.max_transfer_bytes;
  SINEW_ASSIGN_OR_RETURN(std::filesystem::path path, Resolve(config, raw_path));
  const std::string shown = path.string();
  SINEW_ASSIGN_OR_RETURN(InWorkspace w, OpenInWorkspace(config, path));
  auto opened = OpenBeneath(w.root.get(), w.relative, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, shown);
  if (!opened.ok()) return AsRefusal(opened.status());
  const int fd = opened->get();
  struct stat st{};
  if (fstat(fd, &st) != 0) return Status::IOError("cannot read " + shown + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(shown + " is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(shown + " is not a regular file (a fifo, socket or device)");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return Status::ResourceExhausted(shown + " is " + std::to_string(size) + " bytes, more than the " +
                                     std::to_string(max_bytes) + " allowed");
  }
  v1::FileChunk chunk;
  chunk.set_path(shown);
  chunk.set_total_bytes(size);
  std::vector<char> buf(kFileChunkBytes);
  uint64_t sent = 0;
  bool first = true;
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("cannot read " + shown + ": " + std::strerror(errno));
    }
    if (n == 0 && !first) break;
    sent += static_cast<uint64_t>(n);
    if (sent > max_bytes) {
      return Status::ResourceExhausted(shown + " grew past the " + std::to_string(max_bytes) +
                                       " bytes allowed while it was read");
    }
    chunk.set_data(buf.data(), static_cast<size_t>(n));
    if (!send(chunk)) return Status::Cancelled("the receiver of " + shown + " has gone");
    if (n == 0) break;
    first = false;
    chunk.clear_path();
    chunk.clear_total_bytes();
  }
  return Status::Ok();
}

Result<v1::WriteFileResult> ReceiveFile(const ToolConfig& config,
                                        const std::function<bool(v1::FileChunk*)>& next) {
  v1::FileChunk chunk;
  if (!next(&chunk)) return Status::InvalidArgument("no file came: the first message names its path");
  SINEW_ASSIGN_OR_RETURN(std::filesystem::path path, Resolve(config, chunk.path()));
  const std::string shown = path.string();
  const uint64_t total = chunk.total_bytes();
  if (total > config.max_transfer_bytes) {
    return Status::ResourceExhausted(shown + ": " + std::to_string(total) + " bytes is more than the " +
                                     std::to_string(config.max_transfer_bytes) + " a file may have");
  }
  SINEW_ASSIGN_OR_RETURN(InWorkspace w, OpenInWorkspace(config, path));
  auto created = PendingFile::Create(w.root.get(), w.relative, shown);
  if (!created.ok()) return AsRefusal(created.status());
  PendingFile file = std::move(created).value();
  SINEW_RETURN_IF_ERROR(AsRefusal(file.Reserve(total)));
  Sha256 sha;
  for (;;) {
    const std::string& data = chunk.data();
    if (file.size() + data.size() > total) {
      return Status::InvalidArgument(shown + ": more bytes came than the " + std::to_string(total) +
                                     " announced; nothing was written");
    }
    SINEW_RETURN_IF_ERROR(AsRefusal(file.Append(data)));
    sha.Update(data);
    chunk.Clear();
    if (!next(&chunk)) break;
    if (!chunk.path().empty() || chunk.total_bytes() != 0) {
      return Status::InvalidArgument("only the first message may carry path and total_bytes");
    }
  }
  if (file.size() != total) {
    return Status::InvalidArgument(shown + ": the upload ended after " + std::to_string(file.size()) +
                                   " of " + std::to_string(total) + " bytes; nothing was written");
  }
  SINEW_RETURN_IF_ERROR(AsRefusal(file.Commit()));
  v1::WriteFileResult out;
  out.set_path(shown);
  out.set_size(total);
  out.set_sha256(sha.HexDigest());
  return out;
}

}  // namespace sinew::sandbox
