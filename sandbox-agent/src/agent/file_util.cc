#include "agent/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sinew::sandbox {

namespace fs = std::filesystem;

Result<std::string> ReadWholeFile(const fs::path& path) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::NotFound("file not found: " + path.string());
  if (fs::is_directory(st)) {
    return Status::InvalidArgument(path.string() + " is a directory; use list_files to see its content");
  }
  if (!fs::is_regular_file(st)) return Status::InvalidArgument(path.string() + " is not a regular file");
  auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes) {
    return Status::ResourceExhausted(path.string() + " is " + std::to_string(size) +
                                     " bytes, more than the " + std::to_string(kMaxFileBytes) +
                                     " this tool loads; use bash (head, tail, sed -n) instead");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::PermissionDenied("cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteWholeFile(const fs::path& path, const std::string& content) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Status::InvalidArgument(path.string() + " is a directory");
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Status::IOError("cannot create directory " + path.parent_path().string() + ": " + ec.message());
  fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".sinew-tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot write " + path.string() + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return Status::IOError("cannot write " + path.string() + ": " + std::strerror(err) +
                             (err == ENOSPC ? " (the workspace is full; delete files to make room)" : ""));
    }
    off += static_cast<size_t>(n);
  }
  // Keep the mode of a file that is being replaced.
  struct stat st;
  if (stat(path.c_str(), &st) == 0) fchmod(fd, st.st_mode & 07777);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::IOError("cannot replace " + path.string() + ": " + std::strerror(err));
  }
  return Status::Ok();
}

bool LooksBinary(const std::string& content) {
  return content.find('\0', 0) < std::min<size_t>(content.size(), 8192);
}

}  // namespace sinew::sandbox
