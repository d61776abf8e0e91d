#include "pre_tokenizer.h"

#include <functional>

#include "sinew/model/unicode.h"

namespace sinew::model {
namespace {

using unicode::CodePoint;
using unicode::FlagsOf;

// Code points of a text with bounds-checked category queries.
class Cursor {
 public:
  explicit Cursor(const std::vector<CodePoint>& cps) : cps_(cps) {}
  size_t size() const { return cps_.size(); }
  // Returns 0 past the end (a value no predicate below accepts).
  char32_t At(size_t pos) const { return pos < cps_.size() ? cps_[pos].value : 0; }
  bool Valid(size_t pos) const { return pos < cps_.size(); }
  bool Letter(size_t pos) const { return Valid(pos) && FlagsOf(At(pos)).IsLetter(); }
  bool Number(size_t pos) const { return Valid(pos) && FlagsOf(At(pos)).IsNumber(); }
  bool Punct(size_t pos) const { return Valid(pos) && FlagsOf(At(pos)).IsPunctuation(); }
  bool Space(size_t pos) const { return Valid(pos) && FlagsOf(At(pos)).whitespace; }
  bool CasedLetter(size_t pos) const { return Valid(pos) && FlagsOf(At(pos)).cased_letter; }
  // [^\s\p{L}\p{N}]
  bool Other(size_t pos) const {
    if (!Valid(pos)) return false;
    auto flags = FlagsOf(At(pos));
    return !flags.whitespace && !flags.IsLetter() && !flags.IsNumber();
  }

 private:
  const std::vector<CodePoint>& cps_;
};

char32_t AsciiLower(char32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

// Length of a contraction ('s 't 're 've 'm 'll 'd) at `pos`, or 0.
size_t MatchContraction(const Cursor& c, size_t pos, bool ignore_case) {
  if (c.At(pos) != '\'' || !c.Valid(pos + 1)) return 0;
  auto norm = [&](char32_t cp) { return ignore_case ? AsciiLower(cp) : cp; };
  char32_t first = norm(c.At(pos + 1));
  if (first == 's' || first == 't' || first == 'm' || first == 'd') return 2;
  if (!c.Valid(pos + 2)) return 0;
  char32_t second = norm(c.At(pos + 2));
  if ((first == 'r' && second == 'e') || (first == 'v' && second == 'e') ||
      (first == 'l' && second == 'l')) {
    return 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ at `pos` (the caller knows c.Space(pos)); returns the match length.
size_t MatchTrailingSpaces(const Cursor& c, size_t pos) {
  size_t count = 0;
  while (c.Space(pos + count)) ++count;
  if (count > 1 && c.Valid(pos + count)) return count - 1;  // leave one for the next word
  return count;
}

// Length of the GPT-2 pattern's match at `pos` (always >= 1).
size_t MatchGpt2(const Cursor& c, size_t pos) {
  if (size_t n = MatchContraction(c, pos, false)) return n;
  bool space = c.At(pos) == ' ';
  size_t start = pos + (space ? 1 : 0);
  if (c.Letter(start)) {
    size_t end = start;
    while (c.Letter(end)) ++end;
    return end - pos;
  }
  if (c.Number(start)) {
    size_t end = start;
    while (c.Number(end)) ++end;
    return end - pos;
  }
  if (c.Other(start)) {
    size_t end = start;
    while (c.Other(end)) ++end;
    return end - pos;
  }
  if (c.Space(pos)) return MatchTrailingSpaces(c, pos);
  return 1;
}

// Llama 3 (max_digits 3) and Qwen 2 (max_digits 1).
size_t MatchLlama3(const Cursor& c, size_t pos, size_t max_digits) {
  if (size_t n = MatchContraction(c, pos, true)) return n;
  char32_t cp = c.At(pos);
  bool newline = cp == '\r' || cp == '\n';
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.Letter(pos) || (!newline && !c.Number(pos) && c.Letter(pos + 1))) {
    size_t end = pos + 1;
    while (c.Letter(end)) ++end;
    return end - pos;
  }
  // \p{N}{1,max_digits}
  if (c.Number(pos)) {
    size_t end = pos;
    while (c.Number(end) && end - pos < max_digits) ++end;
    return end - pos;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t start = pos + (cp == ' ' ? 1 : 0);
  if (c.Other(start)) {
    size_t end = start;
    while (c.Other(end)) ++end;
    while (c.At(end) == '\r' || c.At(end) == '\n') ++end;
    return end - pos;
  }
  if (c.Space(pos)) {
    // \s*[\r\n]+ : the longest whitespace prefix that ends with a newline.
    size_t count = 0;
    size_t last_newline_end = 0;
    while (c.Space(pos + count)) {
      char32_t ws = c.At(pos + count);
      ++count;
      if (ws == '\r' || ws == '\n') last_newline_end = count;
    }
    if (last_newline_end > 0) return last_newline_end;
    return MatchTrailingSpaces(c, pos);
  }
  return 1;
}

// A matcher of one regex of a sequence: the match length at `pos` within [pos, end), or 0.
using Matcher = std::function<size_t(const Cursor&, size_t pos, size_t end)>;

// Applies one regex to every piece, as an iterated leftmost search does: matches and the
// gaps between them become pieces.
std::vector<size_t> SplitPass(const Cursor& c, const std::vector<size_t>& lengths,
                              const Matcher& matcher) {
  std::vector<size_t> out;
  out.reserve(lengths.size());
  size_t base = 0;
  for (size_t length : lengths) {
    size_t end = base + length;
    size_t gap_start = base;
    size_t pos = base;
    while (pos < end) {
      size_t n = matcher(c, pos, end);
      if (n == 0) {
        ++pos;
        continue;
      }
      if (pos > gap_start) out.push_back(pos - gap_start);
      out.push_back(n);
      pos += n;
      gap_start = pos;
    }
    if (end > gap_start) out.push_back(end - gap_start);
    base = end;
  }
  return out;
}

// Matcher for `\s?X+` where X is `pred`.
Matcher OptionalSpaceThenRun(std::function<bool(const Cursor&, size_t)> pred) {
  return [pred](const Cursor& c, size_t pos, size_t end) -> size_t {
    size_t start = pos;
    if (c.Space(pos) && pos + 1 < end && pred(c, pos + 1)) start = pos + 1;
    if (!pred(c, start)) return 0;
    size_t stop = start;
    while (stop < end && pred(c, stop)) ++stop;
    return stop - pos;
  };
}

Matcher RunOf(std::function<bool(const Cursor&, size_t)> pred, bool single) {
  return [pred, single](const Cursor& c, size_t pos, size_t end) -> size_t {
    if (!pred(c, pos)) return 0;
    if (single) return 1;
    size_t stop = pos;
    while (stop < end && pred(c, stop)) ++stop;
    return stop - pos;
  };
}

bool IsNewline(const Cursor& c, size_t pos) { return c.At(pos) == '\r' || c.At(pos) == '\n'; }

// [一-龥ࠀ-一가-퟿]: U+4E00-U+9FA5, U+0800-U+4E00, U+AC00-U+D7FF.
bool IsCjkRange(const Cursor& c, size_t pos) {
  char32_t cp = c.At(pos);
  if (cp > 0x7F && c.Space(pos)) return false;  // non-ASCII whitespace is seen as \v
  return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF);
}

// [!-/:-~！-／：-～‘-‟　-。]
bool IsDeepseekPunct(const Cursor& c, size_t pos) {
  char32_t cp = c.At(pos);
  if (cp > 0x7F && c.Space(pos)) return false;
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) ||
         (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF5E) ||
         (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002);
}

std::vector<size_t> SplitSequence(const Cursor& c, const std::vector<Matcher>& matchers) {
  std::vector<size_t> lengths;
  if (c.size() > 0) lengths.push_back(c.size());
  for (const Matcher& matcher : matchers) lengths = SplitPass(c, lengths, matcher);
  return lengths;
}

std::vector<size_t> SplitDeepseekCoder(const Cursor& c) {
  static const std::vector<Matcher> kMatchers = {
      RunOf(IsNewline, true),
      OptionalSpaceThenRun([](const Cursor& cur, size_t pos) { return cur.Letter(pos); }),
      OptionalSpaceThenRun([](const Cursor& cur, size_t pos) { return cur.Punct(pos); }),
      RunOf(IsCjkRange, false),
      RunOf([](const Cursor& cur, size_t pos) { return cur.Number(pos); }, true),
  };
  return SplitSequence(c, kMatchers);
}

std::vector<size_t> SplitDeepseekLlm(const Cursor& c) {
  static const std::vector<Matcher> kMatchers = {
      RunOf(IsNewline, true),
      OptionalSpaceThenRun([](const Cursor& cur, size_t pos) { return cur.CasedLetter(pos); }),
      OptionalSpaceThenRun(IsDeepseekPunct),
      // \s+$
      [](const Cursor& cur, size_t pos, size_t end) -> size_t {
        size_t stop = pos;
        while (stop < end && cur.Space(stop)) ++stop;
        return (stop > pos && stop == end) ? stop - pos : 0;
      },
      RunOf(IsCjkRange, false),
      RunOf([](const Cursor& cur, size_t pos) { return cur.Number(pos); }, false),
  };
  return SplitSequence(c, kMatchers);
}

}  // namespace

std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text) {
  std::vector<CodePoint> cps = unicode::DecodeUtf8(text);
  Cursor cursor(cps);
  std::vector<size_t> lengths;  // in code points
  switch (kind) {
    case PreTokenizerKind::kGpt2:
    case PreTokenizerKind::kLlama3:
    case PreTokenizerKind::kQwen2:
      for (size_t pos = 0; pos < cps.size();) {
        size_t n = kind == PreTokenizerKind::kGpt2     ? MatchGpt2(cursor, pos)
                   : kind == PreTokenizerKind::kLlama3 ? MatchLlama3(cursor, pos, 3)
                                                       : MatchLlama3(cursor, pos, 1);
        lengths.push_back(n);
        pos += n;
      }
      break;
    case PreTokenizerKind::kDeepseekCoder:
      lengths = SplitDeepseekCoder(cursor);
      break;
    case PreTokenizerKind::kDeepseekLlm:
      lengths = SplitDeepseekLlm(cursor);
      break;
  }
  std::vector<std::string_view> words;
  words.reserve(lengths.size());
  size_t cp_index = 0;
  for (size_t length : lengths) {
    size_t begin = cps[cp_index].offset;
    size_t last = cp_index + length - 1;
    size_t end = cps[last].offset + cps[last].length;
    words.push_back(text.substr(begin, end - begin));
    cp_index += length;
  }
  return words;
}

}  // namespace sinew::model
