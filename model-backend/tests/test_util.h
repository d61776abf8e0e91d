// Helpers shared by the engine tests: paths of shared test data.
#pragma once

#include <cstdlib>
#include <string>

namespace sinew::model::testutil {

// ../shared/models/stories260K.gguf relative to the source tree.
inline std::string Stories260KPath() {
  const char* src = std::getenv("SINEW_SOURCE_DIR");
  const std::string root = src != nullptr ? src : ".";
  return root + "/../shared/models/stories260K.gguf";
}

}  // namespace sinew::model::testutil

#include <openssl/evp.h>

#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

namespace sinew::model::testutil {

inline constexpr std::string_view kStories260KSha256 =
    "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d";

// Lower-case hex SHA-256 of a file's contents ("" if unreadable).
inline std::string FileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace sinew::model::testutil
