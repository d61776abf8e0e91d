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
    out += "\n\n[... " + std::to_string(dropped_) + " bytes truncated (" + std::to_string(total_) +
           " in total); narrow the command or read a range ...]\n\n";
  }
  out.append(tail_, tail_start_, std::string::npos);
  out.append(tail_, 0, tail_start_);
  return out;
}

}  // namespace sinew::sandbox
