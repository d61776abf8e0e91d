#include "agent/output_limiter.h"

#include <algorithm>

namespace sinew::sandbox {

OutputLimiter::OutputLimiter(size_t cap_bytes)
    : head_cap_(cap_bytes / 2), tail_cap_(cap_bytes - cap_bytes / 2) {}

void OutputLimiter::Append(std::string_view bytes) {
  total_ += bytes.size();
  if (head_.size() < head_cap_) {
    size_t n = std::min(bytes.size(), head_cap_ - head_.size());
    head_.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  for (char c : bytes) {
    if (tail_.size() < tail_cap_) {
      tail_.push_back(c);
    } else {
      tail_[tail_start_] = c;
      tail_start_ = (tail_start_ + 1) % tail_cap_;
      ++dropped_;
    }
  }
}

std::string OutputLimiter::Finish() const {
  std::string out = head_;
  if (dropped_ > 0) {
    out += "\n\n[... " + std::to_string(dropped_) + " bytes truncated (" +
           std::to_string(total_) + " in total); narrow the command or read a range ...]\n\n";
  }
  out.append(tail_, tail_start_, std::string::npos);
  out.append(tail_, 0, tail_start_);
  return out;
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

}  // namespace sinew::sandbox
