// Splits a Jinja template into text and tag tokens the way Jinja2's lexer does with
// trim_blocks and lstrip_blocks on (the transformers configuration): "{%-"/"-%}" strip
// all whitespace on that side, "{%+" keeps the indentation lstrip_blocks would remove,
// a block or comment tag alone on its line takes its indentation and the newline after
// it with it, and one trailing newline of the template is dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sinew::jinja {

struct Token {
  enum class Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Kind kind;
  std::string text;  // text, name, operator, or the decoded string literal / number
  int line;
};

// Throws JinjaError (with the line) for an unterminated tag, comment or string.
std::vector<Token> Lex(std::string_view source);

}  // namespace sinew::jinja
