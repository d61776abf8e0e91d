#include "text_filters.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "bounds.h"
#include "filter_util.h"
#include "methods.h"

namespace sinew::jinja {

bool IsPyWordChar(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  const auto cp = static_cast<UChar32>(c);
  switch (u_charType(cp)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return u_getIntPropertyValue(cp, UCHAR_NUMERIC_TYPE) != U_NT_NONE;
  }
}

Value FilterCenter(const Value& v, const CallArgs& args) {
  const std::string text = v.Str();
  const auto n = static_cast<int64_t>(DecodeUtf8(text).size());
  const int64_t width = IntArg(args.GetOr(0, "width", Value(80)), "center");
  if (width <= n) return Same(v, text);
  const int64_t margin = width - n;
  CheckTextSize(text.size() + static_cast<uint64_t>(margin));
  const int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center
  return Same(v, std::string(static_cast<size_t>(left), ' ') + text +
                     std::string(static_cast<size_t>(margin - left), ' '));
}

Value FilterTruncate(const Value& v, const CallArgs& args) {
  if (v.is_undefined()) return v;
  if (!v.is_string()) Fail("object of type '" + v.TypeName() + "' has no len()");
  const std::u32string s = Text(v);
  const int64_t length = IntArg(args.GetOr(0, "length", Value(255)), "truncate");
  const bool killwords = args.GetOr(1, "killwords", Value(false)).Truthy();
  const std::u32string end = Text(args.GetOr(2, "end", Value("...")));
  const Value leeway_arg = args.GetOr(3, "leeway", Value::None());
  const int64_t leeway = leeway_arg.is_none() ? 5 : IntArg(leeway_arg, "truncate");
  const auto end_length = static_cast<int64_t>(end.size());
  if (length < end_length) Fail("expected length >= " + std::to_string(end_length) + ", got " + std::to_string(length));
  if (leeway < 0) Fail("expected leeway >= 0, got " + std::to_string(leeway));
  int64_t limit = 0;  // length + leeway; past int64 nothing is that long
  if (__builtin_add_overflow(length, leeway, &limit) || static_cast<int64_t>(s.size()) <= limit) return v;
  std::u32string kept = s.substr(0, static_cast<size_t>(length - end_length));
  if (!killwords) {
    const size_t space = kept.rfind(U' ');
    if (space != std::u32string::npos) kept.resize(space);
  }
  // Markup + str escapes the str (markupsafe).
  return v.is_markup() ? Value::Markup(Utf8(kept) + HtmlEscape(Utf8(end))) : Value(Utf8(kept + end));
}

namespace {

// textwrap's chunks (TextWrapper._split): whitespace runs and words; with
// break_on_hyphens, words also split after the hyphens of hyphenated words and before
// em-dashes (wordsep_re, matched here by hand: it needs look-behind).
bool IsWrapSpace(char32_t c) { return c == '\t' || c == '\n' || c == 0x0b || c == 0x0c || c == '\r' || c == ' '; }
bool IsLetter(char32_t c) { return IsPyWordChar(c) && !u_isdigit(static_cast<UChar32>(c)); }  // [^\d\W]
bool IsWordPunct(char32_t c) {
  return IsPyWordChar(c) || c == '!' || c == '"' || c == '\'' || c == '&' || c == '.' || c == ',' || c == '?';
}

std::vector<std::u32string> WrapChunks(const std::u32string& s, bool break_on_hyphens) {
  std::vector<std::u32string> chunks;
  const size_t n = s.size();
  auto at = [&](size_t i) -> char32_t { return i < n ? s[i] : 0; };
  // -{2,} followed by \w, starting at q.
  auto dashes_then_word = [&](size_t q) {
    size_t e = q;
    while (e < n && s[e] == '-') ++e;
    return e - q >= 2 && e < n && IsPyWordChar(s[e]);
  };
  size_t p = 0;
  while (p < n) {
    size_t end = p;
    if (IsWrapSpace(s[p])) {
      while (end < n && IsWrapSpace(s[end])) ++end;
    } else if (!break_on_hyphens) {
      while (end < n && !IsWrapSpace(s[end])) ++end;
    } else if (p > 0 && IsWordPunct(s[p - 1]) && dashes_then_word(p)) {
      while (end < n && s[end] == '-') ++end;  // an em-dash between words
    } else {
      // The shortest run of non-space that ends a hyphenated part, the word, or
      // comes before an em-dash.
      for (size_t q = p + 1;; ++q) {
        if (at(q) == '-' && q + 1 < n) {
          const bool behind = (q >= 2 && IsLetter(s[q - 2]) && IsLetter(s[q - 1])) ||
                              (q >= 3 && IsLetter(s[q - 3]) && s[q - 2] == '-' && IsLetter(s[q - 1]));
          const bool ahead = IsLetter(at(q + 1)) &&
                             (IsLetter(at(q + 2)) || (at(q + 2) == '-' && IsLetter(at(q + 3))));
          if (behind && ahead) {
            end = q + 1;
            break;
          }
        }
        if (q >= n || IsWrapSpace(s[q])) {
          end = q;
          break;
        }
        if (IsWordPunct(s[q - 1]) && dashes_then_word(q)) {
          end = q;
          break;
        }
      }
    }
    chunks.push_back(s.substr(p, end - p));
    p = end;
  }
  return chunks;
}

// textwrap.wrap(text, width, expand_tabs=False, replace_whitespace=False, ...).
std::vector<std::u32string> Wrap(const std::u32string& text, int64_t width, bool break_long_words,
                                 bool break_on_hyphens) {
  if (width <= 0) Fail("invalid width " + std::to_string(width) + " (must be > 0)");
  std::vector<std::u32string> chunks = WrapChunks(text, break_on_hyphens);
  std::reverse(chunks.begin(), chunks.end());
  std::vector<std::u32string> lines;
  uint64_t copied = 0;
  const auto length = [](const std::u32string& c) { return static_cast<int64_t>(c.size()); };
  while (!chunks.empty()) {
    std::vector<std::u32string> line;
    int64_t line_length = 0;
    if (IsBlank(chunks.back()) && !lines.empty()) chunks.pop_back();
    while (!chunks.empty() && line_length + length(chunks.back()) <= width) {
      line_length += length(chunks.back());
      line.push_back(std::move(chunks.back()));
      chunks.pop_back();
    }
    if (!chunks.empty() && length(chunks.back()) > width) {  // _handle_long_word
      const int64_t space_left = width - line_length;
      if (break_long_words) {
        int64_t end = space_left;
        const std::u32string& chunk = chunks.back();
        if (break_on_hyphens && length(chunk) > space_left) {
          const size_t hyphen = space_left > 0 ? chunk.rfind(U'-', static_cast<size_t>(space_left - 1)) : std::u32string::npos;
          if (hyphen != std::u32string::npos && hyphen > 0 &&
              std::any_of(chunk.begin(), chunk.begin() + static_cast<long>(hyphen), [](char32_t c) { return c != '-'; })) {
            end = static_cast<int64_t>(hyphen) + 1;
          }
        }
        CountCopied(copied, chunk.size() * sizeof(char32_t), "wordwrap");
        line.push_back(chunk.substr(0, static_cast<size_t>(end)));
        chunks.back() = chunk.substr(static_cast<size_t>(end));
      } else if (line.empty()) {
        line.push_back(std::move(chunks.back()));
        chunks.pop_back();
      }
    }
    if (!line.empty() && IsBlank(line.back())) line.pop_back();
    if (!line.empty()) {
      std::u32string joined;
      for (const auto& c : line) joined += c;
      lines.push_back(std::move(joined));
    }
  }
  return lines;
}

}  // namespace

Value FilterWordwrap(const Value& v, const CallArgs& args) {
  const int64_t width = IntArg(args.GetOr(0, "width", Value(79)), "wordwrap");
  const bool break_long_words = args.GetOr(1, "break_long_words", Value(true)).Truthy();
  const Value wrapstring_arg = args.GetOr(2, "wrapstring", Value::None());
  const std::string wrapstring = wrapstring_arg.is_none() ? "\n" : wrapstring_arg.Str();
  const bool break_on_hyphens = args.GetOr(3, "break_on_hyphens", Value(true)).Truthy();
  if (!v.is_string()) Fail("wordwrap: expected a string, got '" + v.TypeName() + "'");
  std::string out;
  bool first_line = true;
  for (const std::string& paragraph : PySplitLines(v.str())) {
    if (!first_line) out += wrapstring;
    first_line = false;
    bool first = true;
    for (const std::u32string& line : Wrap(DecodeUtf8(paragraph), width, break_long_words, break_on_hyphens)) {
      if (!first) out += wrapstring;
      first = false;
      out += Utf8(line);
      CheckTextSize(out.size());
    }
    CheckTextSize(out.size());
  }
  return Value(std::move(out));
}

Value FilterWordcount(const Value& v, const CallArgs&) {
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : Text(v)) {
    const bool word = IsPyWordChar(c);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

namespace {

// Python's float(str): optional whitespace, sign, digits, point, exponent, inf, nan.
double PyFloat(const Value& v) {
  if (v.is_number()) return v.float_value();
  if (!v.is_string()) Fail("float() argument must be a string or a real number, not '" + v.TypeName() + "'");
  const std::string s = PyStrip(v.str(), "", true, true, false);
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-';
  });
  const bool hex = s.find_first_of("xX") != std::string::npos;
  char* end = nullptr;
  const double d = plain && !hex ? std::strtod(s.c_str(), &end) : 0;
  if (!plain || hex || end != s.c_str() + s.size()) Fail("could not convert string to float: " + v.Repr());
  return d;
}

std::string FormatFixed1(double x) {
  if (std::isnan(x)) return "nan";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

}  // namespace

Value FilterFilesizeformat(const Value& v, const CallArgs& args) {
  const double bytes = PyFloat(v);
  const bool binary = args.GetOr(0, "binary", Value(false)).Truthy();
  const double base = binary ? 1024 : 1000;
  static const char* const kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* const kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value("1 Byte");
  if (bytes < base) {
    if (!std::isfinite(bytes)) Fail("cannot convert float infinity to integer");
    if (bytes < -9.2e18) Fail("filesizeformat: the value is past the 64-bit range");
    return Value(std::to_string(static_cast<int64_t>(bytes)) + " Bytes");
  }
  double unit = 0;
  std::string prefix;
  for (int i = 0; i < 8; ++i) {
    // base ** (i + 2), as the double Python compares and divides by.
    unit = binary ? std::ldexp(1.0, 10 * (i + 2)) : std::strtod(("1e" + std::to_string(3 * (i + 2))).c_str(), nullptr);
    prefix = binary ? kBinary[i] : kDecimal[i];
    if (bytes < unit) break;
  }
  return Value(FormatFixed1(base * bytes / unit) + " " + prefix);
}

namespace {

// One conversion of printf-style formatting (Python's `str % values`).
std::string FormatOne(char conversion, const std::string& flags, int64_t width, int64_t precision, const Value& value) {
  if (width > 0) CheckTextSize(static_cast<size_t>(width));
  if (precision > 0) CheckTextSize(static_cast<size_t>(precision));
  auto pad = [&](std::u32string text) {
    if (static_cast<int64_t>(text.size()) < width) {
      const std::u32string fill(static_cast<size_t>(width) - text.size(), U' ');
      text = flags.find('-') != std::string::npos ? text + fill : fill + text;
    }
    return Utf8(text);
  };
  auto c_format = [&](const std::string& length, auto number) {
    std::string spec = "%" + flags;
    if (width >= 0) spec += std::to_string(width);
    if (precision >= 0) spec += "." + std::to_string(precision);
    spec += length + conversion;
    const int n = std::snprintf(nullptr, 0, spec.c_str(), number);
    std::string out(static_cast<size_t>(n) + 1, '\0');
    std::snprintf(out.data(), out.size(), spec.c_str(), number);
    out.resize(static_cast<size_t>(n));
    return out;
  };
  switch (conversion) {
    case 's':
    case 'r':
    case 'a': {
      std::u32string text = DecodeUtf8(conversion == 's' ? value.Str() : value.Repr());
      if (conversion == 'a' && std::any_of(text.begin(), text.end(), [](char32_t c) { return c >= 0x80; })) {
        Fail("format: %a of non-ASCII text is not supported");
      }
      if (precision >= 0 && static_cast<size_t>(precision) < text.size()) text.resize(static_cast<size_t>(precision));
      return pad(text);
    }
    case 'd':
    case 'i':
    case 'u': {
      if (!value.is_number()) Fail("%" + std::string(1, conversion) + " format: a real number is required, not " + value.TypeName());
      int64_t i = value.int_value();
      if (value.kind() == Value::Kind::kFloat) {
        const double f = value.float_value();
        if (!std::isfinite(f)) Fail("cannot convert float " + FloatRepr(f) + " to integer");
        if (std::fabs(f) >= 9.2e18) Fail("format: the value is past the 64-bit range");
        i = static_cast<int64_t>(f);
      }
      const char saved = conversion;
      conversion = 'd';
      std::string out = c_format("ll", static_cast<long long>(i));
      conversion = saved;
      return out;
    }
    case 'o':
    case 'x':
    case 'X':
      if (value.kind() != Value::Kind::kInt && value.kind() != Value::Kind::kBool) {
        Fail("%" + std::string(1, conversion) + " format: an integer is required, not " + value.TypeName());
      }
      if (value.int_value() < 0 || (conversion == 'o' && flags.find('#') != std::string::npos)) {
        Fail("format: %" + std::string(1, conversion) + " of this value is not supported");
      }
      return c_format("ll", static_cast<long long>(value.int_value()));
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!value.is_number()) Fail("must be real number, not " + value.TypeName());
      double f = value.float_value();
      if (std::isnan(f)) f = std::fabs(f);  // Python prints nan without a sign
      return c_format("", f);
    }
    case 'c': {
      if (value.is_string()) {
        if (DecodeUtf8(value.str()).size() != 1) Fail("%c requires int or char");
        return pad(DecodeUtf8(value.str()));
      }
      if (value.kind() != Value::Kind::kInt) Fail("%c requires int or char");
      if (value.int_value() < 0 || value.int_value() > 0x10FFFF) Fail("%c arg not in range(0x110000)");
      return pad(std::u32string(1, static_cast<char32_t>(value.int_value())));
    }
    default:
      Fail(std::string("unsupported format character '") + conversion + "'");
  }
}

}  // namespace

Value FilterFormat(const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    Fail("can't handle positional and keyword arguments at the same time");
  }
  const std::string format = v.Str();
  const bool mapping = !args.keyword.empty();
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size();) {
    if (format[i] != '%') {
      out += format[i++];
      continue;
    }
    ++i;
    const Value* value = nullptr;
    if (i < format.size() && format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) Fail("incomplete format key");
      if (!mapping) Fail("format requires a mapping");
      const std::string key = format.substr(i + 1, close - i - 1);
      for (const auto& [name, given] : args.keyword) {
        if (name == key) value = &given;
      }
      if (value == nullptr) Fail("KeyError: '" + key + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) flags += format[i++];
    auto number = [&]() -> int64_t {
      if (i < format.size() && format[i] == '*') Fail("format: '*' widths are not supported");
      if (i >= format.size() || !std::isdigit(static_cast<unsigned char>(format[i]))) return -1;
      int64_t n = 0;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) {
        n = n * 10 + (format[i++] - '0');
        if (n > (int64_t{1} << 40)) Fail("width too big");
      }
      return n;
    };
    const int64_t width = number();
    int64_t precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = std::max<int64_t>(number(), 0);
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) Fail("incomplete format");
    const char conversion = format[i++];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (value == nullptr) {
      if (mapping) Fail("format: a conversion without a key needs positional arguments");
      if (next >= args.positional.size()) Fail("not enough arguments for format string");
      value = &args.positional[next++];
    }
    out += FormatOne(conversion, flags, width, precision, *value);
    CheckTextSize(out.size());
  }
  if (!mapping && next < args.positional.size()) Fail("not all arguments converted during string formatting");
  return Value(std::move(out));
}

namespace {

// pprint.pformat(value) (width 80, dicts sorted by key), as PrettyPrinter does it.
class PrettyPrinter {
 public:
  std::string Format(const Value& v) {
    Write(v, 0, 0, 1);
    return std::move(out_);
  }

 private:
  static constexpr int64_t kWidth = 80;

  // _safe_repr: repr with dicts sorted by key.
  static std::string Repr(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kList: {
        if (v.is_generator()) Fail("pprint of a generator is not supported (apply |list first)");
        if (v.is_group()) Fail("pprint of a groupby tuple is not supported");
        if (v.list().items.empty()) return v.Repr();
        std::string out = v.list().tuple ? "(" : "[";
        for (size_t i = 0; i < v.list().items.size(); ++i) out += (i ? ", " : "") + Repr(v.list().items[i]);
        if (v.list().tuple && v.list().items.size() == 1) out += ",";
        return out + (v.list().tuple ? ")" : "]");
      }
      case Value::Kind::kDict: {
        std::string out = "{";
        bool first = true;
        for (const auto& [key, value] : Sorted(v)) {
          out += (first ? "" : ", ") + Value(key).Repr() + ": " + Repr(value);
          first = false;
        }
        return out + "}";
      }
      case Value::Kind::kNamespace:
      case Value::Kind::kFunction:
      case Value::Kind::kUndefined:
        Fail("pprint of a " + v.TypeName() + " is not supported");
      default:
        return v.Repr();
    }
  }
  static std::vector<std::pair<std::string, Value>> Sorted(const Value& dict) {
    auto items = dict.dict().items;
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return items;
  }
  static int64_t Length(const std::string& s) { return static_cast<int64_t>(DecodeUtf8(s).size()); }

  void Put(const std::string& s) {
    out_ += s;
    CheckTextSize(out_.size());
  }

  // PrettyPrinter._format.
  void Write(const Value& v, int64_t indent, int64_t allowance, int level) {
    const std::string rep = Repr(v);
    if (Length(rep) <= kWidth - indent - allowance) return Put(rep);
    if (v.kind() == Value::Kind::kDict) {
      Put("{");
      auto items = Sorted(v);
      const int64_t inner = indent + 1;
      for (size_t i = 0; i < items.size(); ++i) {
        const bool last = i + 1 == items.size();
        const std::string key = Value(items[i].first).Repr();
        Put(key + ": ");
        Write(items[i].second, inner + Length(key) + 2, last ? allowance + 1 : 1, level + 1);
        if (!last) Put(",\n" + std::string(static_cast<size_t>(inner), ' '));
      }
      return Put("}");
    }
    if (v.is_list()) {
      const bool tuple = v.list().tuple;
      const std::string end = tuple ? (v.list().items.size() == 1 ? ",)" : ")") : "]";
      Put(tuple ? "(" : "[");
      const auto& items = v.list().items;
      const int64_t inner = indent + 1;
      for (size_t i = 0; i < items.size(); ++i) {
        const bool last = i + 1 == items.size();
        if (i > 0) Put(",\n" + std::string(static_cast<size_t>(inner), ' '));
        Write(items[i], inner, last ? allowance + static_cast<int64_t>(end.size()) : 1, level + 1);
      }
      return Put(end);
    }
    if (v.is_string() && !v.str().empty()) return WriteString(v.str(), indent, allowance, level);
    Put(rep);
  }

  // PrettyPrinter._pprint_str: a long string as adjacent literals split at spaces.
  void WriteString(const std::string& s, int64_t indent, int64_t allowance, int level) {
    std::vector<std::string> chunks;
    std::vector<std::u32string> lines;  // splitlines(keepends=True)
    {
      const std::u32string text = DecodeUtf8(s);
      std::u32string current;
      for (size_t i = 0; i < text.size(); ++i) {
        current += text[i];
        const char32_t c = text[i];
        if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
          current += text[++i];
          lines.push_back(std::move(current));
          current.clear();
        } else if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
                   c == 0x85 || c == 0x2028 || c == 0x2029) {
          lines.push_back(std::move(current));
          current.clear();
        }
      }
      if (!current.empty()) lines.push_back(std::move(current));
    }
    if (level == 1) {
      ++indent;
      ++allowance;
    }
    const int64_t max_width = kWidth - indent;
    int64_t max_width1 = max_width;
    std::string rep;
    for (size_t i = 0; i < lines.size(); ++i) {
      rep = Value(Utf8(lines[i])).Repr();
      if (i + 1 == lines.size()) max_width1 -= allowance;
      if (Length(rep) <= max_width1) {
        chunks.push_back(rep);
        continue;
      }
      // re.findall(r'\S*\s*', line) without the final empty match.
      std::vector<std::u32string> parts;
      const std::u32string& line = lines[i];
      for (size_t p = 0; p < line.size();) {
        size_t q = p;
        while (q < line.size() && !IsPySpace(line[q])) ++q;
        while (q < line.size() && IsPySpace(line[q])) ++q;
        parts.push_back(line.substr(p, q - p));
        p = q;
      }
      int64_t max_width2 = max_width;
      std::u32string current;
      for (size_t j = 0; j < parts.size(); ++j) {
        const std::u32string candidate = current + parts[j];
        if (j + 1 == parts.size() && i + 1 == lines.size()) max_width2 -= allowance;
        if (Length(Value(Utf8(candidate)).Repr()) > max_width2) {
          if (!current.empty()) chunks.push_back(Value(Utf8(current)).Repr());
          current = parts[j];
        } else {
          current = candidate;
        }
      }
      if (!current.empty()) chunks.push_back(Value(Utf8(current)).Repr());
    }
    if (chunks.size() == 1) return Put(rep);
    if (level == 1) Put("(");
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (i > 0) Put("\n" + std::string(static_cast<size_t>(indent), ' '));
      Put(chunks[i]);
    }
    if (level == 1) Put(")");
  }

  std::string out_;
};

}  // namespace

Value FilterPprint(const Value& v, const CallArgs&) { return Value(PrettyPrinter().Format(v)); }

}  // namespace sinew::jinja
