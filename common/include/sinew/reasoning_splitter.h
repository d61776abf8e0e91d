// ReasoningSplitter: splits a model's text into its reasoning (<think>...</think>) and the
// rest (the content), as it streams. The model server uses it for reasoning_content; the
// harness for replies of OpenAI-compatible servers that leave the tags in the text.
//
// Only a <think> at the very start (after whitespace, which is then dropped) opens
// reasoning, or the prompt when it ended with "<think>" (`opened_by_prompt`; DeepSeek R1's
// templates do so). A tag may be cut across pieces; an unclosed <think> keeps the rest as
// reasoning. Whitespace right after </think> is dropped from the content.
//
// Thread-safety: a ReasoningSplitter is used by one thread at a time.
#pragma once

#include <string>
#include <string_view>

namespace sinew {

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool opened_by_prompt = false)
      : state_(opened_by_prompt ? State::kThinking : State::kStart) {}
  struct Parts {
    std::string reasoning;
    std::string content;
  };
  // The parts of `text` that are final now (a possible tag prefix is held back).
  Parts Push(std::string_view text);
  // At the end: whatever was held back (a tag that never completed is content, or
  // reasoning inside an unclosed <think>).
  Parts Finish();

 private:
  enum class State { kStart, kThinking, kContent } state_;
  std::string held_;
  bool skip_space_ = false;  // drop the whitespace that follows </think>
};

// The whole of `text` at once: the reasoning (whitespace trimmed at both ends) and the
// content.
ReasoningSplitter::Parts SplitReasoning(std::string_view text, bool opened_by_prompt);

}  // namespace sinew
