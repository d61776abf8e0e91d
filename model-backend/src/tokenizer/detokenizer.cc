#include "sinew/model/tokenizer.h"
#include "sinew/model/unicode.h"
#include "sinew/utf8.h"

namespace sinew::model {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool at_start)
    : tokenizer_(tokenizer),
      strip_leading_space_(at_start && tokenizer.vocab().model == VocabModel::kSentencePiece &&
                           tokenizer.vocab().add_space_prefix) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  std::string piece = tokenizer_.TokenPiece(id);
  if (strip_leading_space_ && !piece.empty()) {
    if (piece[0] == ' ') piece.erase(0, 1);
    strip_leading_space_ = false;
  }
  pending_ += piece;
  size_t complete = unicode::CompleteUtf8Prefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace sinew::model
