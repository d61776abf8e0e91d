// OutputLimiter: collects tool output up to a byte cap, keeping the head and the tail
// and dropping the middle, which it replaces by a marker saying how much was cut.
//
// Thread-safety: none; one limiter per tool call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "sinew/utf8.h"

namespace sinew::sandbox {

class OutputLimiter {
 public:
  // REQUIRES: cap_bytes >= 2.
  explicit OutputLimiter(size_t cap_bytes);

  void Append(std::string_view bytes);
  bool truncated() const { return dropped_ > 0; }
  size_t total_bytes() const { return total_; }
  // The kept head, the truncation marker if anything was dropped, and the tail.
  std::string Finish() const;

 private:
  size_t head_cap_;
  size_t tail_cap_;
  std::string head_;
  std::string tail_;  // ring buffer once full; tail_start_ is its oldest byte
  size_t tail_start_ = 0;
  size_t dropped_ = 0;
  size_t total_ = 0;
};

// SanitizeUtf8 (sinew/utf8.h) makes tool output fit a protobuf `string`.
using sinew::SanitizeUtf8;

}  // namespace sinew::sandbox
