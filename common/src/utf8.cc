#include "sinew/utf8.h"

#include <cstdint>

namespace sinew {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Bytes of the sequence a lead byte starts (1 for ASCII and for bytes that start none).
size_t SequenceLength(char c) {
  const auto b = static_cast<unsigned char>(c);
  if (b >= 0xF0 && b <= 0xF4) return 4;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  return 1;
}

}  // namespace

std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  // Back up to the start of the character the cut falls in (at most 3 continuation bytes).
  size_t start = cut;
  while (start > 0 && cut - start < 3 && IsContinuation(text[start])) --start;
  if (start < cut && !IsContinuation(text[start]) && start + SequenceLength(text[start]) > cut) {
    cut = start;
  }
  return text.substr(0, cut);
}

std::string SanitizeUtf8(std::string_view in) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    auto c = static_cast<unsigned char>(in[i]);
    size_t len = 0;
    uint32_t min_cp = 0;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min_cp = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min_cp = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min_cp = 0x10000;
    }
    bool valid = len > 0 && i + len <= in.size();
    uint32_t cp = len > 0 ? (c & (0xFF >> (len + 1))) : 0;
    for (size_t k = 1; valid && k < len; ++k) {
      auto cc = static_cast<unsigned char>(in[i + k]);
      if ((cc & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (valid && (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) valid = false;
    if (valid) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

}  // namespace sinew
