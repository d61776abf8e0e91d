#include "sinew/reasoning_splitter.h"

#include <algorithm>

namespace sinew {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kSpace = " \t\r\n";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t PartialTag(std::string_view text, std::string_view tag) {
  for (size_t keep = std::min(tag.size() - 1, text.size()); keep > 0; --keep) {
    if (tag.starts_with(text.substr(text.size() - keep))) return keep;
  }
  return 0;
}

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::Push(std::string_view text) {
  Parts parts;
  held_ += text;
  while (!held_.empty()) {
    if (state_ == State::kContent) {
      if (skip_space_) {  // "</think>\n\n" then the answer
        const size_t first = held_.find_first_not_of(kSpace);
        held_.erase(0, first == std::string::npos ? held_.size() : first);
        if (held_.empty()) return parts;
        skip_space_ = false;
      }
      parts.content += held_;
      held_.clear();
    } else if (state_ == State::kStart) {
      const size_t first = held_.find_first_not_of(kSpace);
      if (first == std::string::npos) return parts;
      const std::string_view rest = std::string_view(held_).substr(first);
      if (rest.starts_with(kThinkOpen)) {
        held_.erase(0, first + kThinkOpen.size());
        state_ = State::kThinking;
      } else if (kThinkOpen.starts_with(rest)) {
        return parts;  // could still become <think>
      } else {
        state_ = State::kContent;
      }
    } else {
      const size_t close = held_.find(kThinkClose);
      if (close != std::string::npos) {
        parts.reasoning += held_.substr(0, close);
        held_.erase(0, close + kThinkClose.size());
        state_ = State::kContent;
        skip_space_ = true;
        continue;
      }
      const size_t keep = PartialTag(held_, kThinkClose);
      parts.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return parts;
    }
  }
  return parts;
}

ReasoningSplitter::Parts ReasoningSplitter::Finish() {
  Parts parts;
  (state_ == State::kThinking ? parts.reasoning : parts.content) = std::move(held_);
  held_.clear();
  return parts;
}

ReasoningSplitter::Parts SplitReasoning(std::string_view text, bool opened_by_prompt) {
  ReasoningSplitter splitter(opened_by_prompt);
  ReasoningSplitter::Parts all = splitter.Push(text);
  ReasoningSplitter::Parts tail = splitter.Finish();
  all.reasoning = std::string(Trim(all.reasoning + tail.reasoning));
  all.content += tail.content;
  return all;
}

}  // namespace sinew
