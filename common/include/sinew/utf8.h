// UTF-8 helpers for text that people read (titles, summaries).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sinew {

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a
// UTF-8 sequence: a cut never splits a character (bytes that are not UTF-8 at all are
// treated as characters of their own).
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes);

// `bytes` with every invalid UTF-8 sequence (bad lead or continuation bytes, overlong
// forms, surrogates, code points past U+10FFFF, a cut-off end) replaced by U+FFFD, one per
// byte: text that can travel in JSON or a protobuf `string`.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace sinew
