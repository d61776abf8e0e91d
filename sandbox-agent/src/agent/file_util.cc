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
    return Status::InvalidArgument(path.string() +
                                   " is a directory; use list_files to see its content");
  }
  if (!fs::is_regular_file(st))
    return Status::InvalidArgument(path.string() + " is not a regular file");
  auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes) {
    return Status::ResourceExhausted(path.string() + " is " + std::to_string(size) +
                                     " bytes, more than the " + std::to_string(kMaxFileBytes) +
                                     " this tool loads; use bash (head, tail, sed -n) instead");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::PermissionDenied("cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool LooksBinary(const std::string& content) {
  return content.find('\0', 0) < std::min<size_t>(content.size(), 8192);
}

}  // namespace sinew::sandbox
