#include "sinew/utf8.h"

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

}  // namespace sinew
