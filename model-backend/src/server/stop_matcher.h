// StopMatcher: applies text-level stop strings to a stream of text. Text that might be
// the start of a stop string is held back until it is known not to be one; the stop
// string and everything after it are never released.
//
// Thread-safety: none; one per generation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sinew::model {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds `text` and returns what can be released now. Once a stop string has appeared,
  // returns the text before it, sets stopped(), and returns "" from then on.
  std::string Push(std::string_view text);
  // Releases the held-back text (call at the end of a generation that did not stop).
  std::string Flush();
  bool stopped() const { return stopped_; }
  // The stop string that stopped the text ("" while not stopped); of several that end
  // at the same first position, the one given first.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace sinew::model
