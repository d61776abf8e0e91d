#include "lexer.h"

#include <algorithm>
#include <cctype>

#include "value.h"

namespace sinew::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

[[noreturn]] void FailAt(int line, std::string message) { throw JinjaError{std::move(message), line}; }

std::string Normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

std::string DecodeString(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t len = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        const std::string hex(body.substr(i + 1, len));
        if (hex.size() != len || !std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
          FailAt(line, "truncated \\" + std::string(1, c) + " escape");
        }
        out += EncodeUtf8(std::u32string(1, static_cast<char32_t>(std::stoul(hex, nullptr, 16))));
        i += len;
        break;
      }
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> Run() {
    bool strip_next = false;     // the previous tag ended with "-"
    bool line_starting = true;   // the previous tag's match ended with a newline
    while (pos_ < src_.size()) {
      size_t start = pos_;
      while (true) {
        start = src_.find('{', start);
        if (start == std::string::npos || start + 1 >= src_.size()) {
          start = std::string::npos;
          break;
        }
        const char next = src_[start + 1];
        if (next == '{' || next == '%' || next == '#') break;
        ++start;
      }
      std::string text = src_.substr(pos_, start == std::string::npos ? std::string::npos : start - pos_);
      const int text_line = line_;
      line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      if (strip_next) {
        size_t skip = 0;
        while (skip < text.size() && IsSpace(text[skip])) ++skip;
        text.erase(0, skip);
      }
      if (start == std::string::npos) {
        Emit(Token::Kind::kText, std::move(text), text_line);
        break;
      }
      const char type = src_[start + 1];
      const char modifier = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (modifier != '+' && type != '{') {
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 || line_starting) {
          const bool all_space = l_pos < text.size() &&
              std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), IsSpace);
          if (all_space) text.erase(l_pos);
        }
      }
      Emit(Token::Kind::kText, std::move(text), text_line);
      pos_ = start + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      char end_modifier = '\0';
      if (type == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) FailAt(line_, "unterminated comment");
        end_modifier = end > pos_ ? src_[end - 1] : '\0';
        line_ += static_cast<int>(std::count(src_.begin() + static_cast<long>(pos_), src_.begin() + static_cast<long>(end), '\n'));
        pos_ = end + 2;
      } else {
        tokens_.push_back({type == '{' ? Token::Kind::kVarBegin : Token::Kind::kBlockBegin, "", line_});
        end_modifier = LexTag(type == '{' ? '}' : '%');
      }
      // What follows the tag: "-" strips all whitespace; trim_blocks eats one newline after
      // a block or comment tag.
      strip_next = end_modifier == '-';
      line_starting = false;
      if (strip_next) {
        size_t scan = pos_;
        while (scan < src_.size() && IsSpace(src_[scan])) ++scan;
        line_starting = scan > pos_ && src_[scan - 1] == '\n';
      } else if (type != '{' && end_modifier != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;
        ++line_;
        line_starting = true;
      }
    }
    tokens_.push_back({Token::Kind::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  void Emit(Token::Kind kind, std::string text, int line) {
    if (!text.empty()) tokens_.push_back({kind, std::move(text), line});
  }

  // Lexes the inside of a {{ }} or {% %} tag up to and including its end delimiter;
  // returns the modifier before the delimiter ('-', '+' or '\0').
  char LexTag(char close) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) FailAt(line_, close == '}' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      const std::string_view rest = std::string_view(src_).substr(pos_);
      if (depth == 0) {
        for (const char modifier : {'-', '+', '\0'}) {
          std::string end;
          if (modifier != '\0') end += modifier;
          end += close;
          end += '}';
          if (rest.starts_with(end)) {
            pos_ += end.size();
            tokens_.push_back({close == '}' ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", line_});
            return modifier;
          }
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        tokens_.push_back({Token::Kind::kName, std::string(rest.substr(0, n)), line_});
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t n = 0;
        bool is_float = false;
        while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        if (n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
          is_float = true;
          ++n;
          while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
        }
        if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
          size_t m = n + 1;
          if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
          if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
            is_float = true;
            n = m;
            while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
          }
        }
        std::string number(rest.substr(0, n));
        number.erase(std::remove(number.begin(), number.end(), '_'), number.end());
        tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, number, line_});
        pos_ += n;
      } else if (c == '\'' || c == '"') {
        size_t n = 1;
        while (n < rest.size() && rest[n] != c) n += rest[n] == '\\' ? 2 : 1;
        if (n >= rest.size()) FailAt(line_, "unexpected end of string");
        const int line = line_;
        line_ += static_cast<int>(std::count(rest.begin(), rest.begin() + static_cast<long>(n), '\n'));
        tokens_.push_back({Token::Kind::kString, DecodeString(rest.substr(1, n - 1), line), line});
        pos_ += n + 1;
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                           "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".",
                                           ":", "|", ";"};
        bool matched = false;
        for (const char* op : kOps) {
          if (rest.starts_with(op)) {
            const std::string_view o(op);
            if (o == "(" || o == "[" || o == "{") ++depth;
            if (o == ")" || o == "]" || o == "}") --depth;
            tokens_.push_back({Token::Kind::kOp, std::string(o), line_});
            pos_ += o.size();
            matched = true;
            break;
          }
        }
        if (!matched) FailAt(line_, "unexpected char '" + std::string(1, c) + "'");
      }
    }
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Lex(std::string_view source) { return Lexer(Normalize(source)).Run(); }

}  // namespace sinew::jinja
