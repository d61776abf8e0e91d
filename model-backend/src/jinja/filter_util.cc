// Helpers shared by the filter files (filter_util.h).
#include "filter_util.h"

#include <algorithm>

#include "builtins.h"
#include "methods.h"

namespace sinew::jinja {

// A Python int argument (bool counts); anything else is Python's TypeError.
int64_t IntArg(const Value& v, std::string_view what) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return v.int_value();
  Fail(std::string(what) + ": '" + v.TypeName() + "' object cannot be interpreted as an integer");
}

std::u32string Text(const Value& v) { return DecodeUtf8(v.Str()); }
std::string Utf8(std::u32string_view s) { return EncodeUtf8(s); }

const Value* Arg(const CallArgs& args, size_t index, std::string_view name) { return args.Get(index, name); }

const Value& Required(const CallArgs& args, size_t index, std::string_view name, std::string_view what) {
  const Value* v = args.Get(index, name);
  if (v == nullptr) Fail(std::string(what) + "() missing required argument '" + std::string(name) + "'");
  return *v;
}

Value Attribute(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    const std::optional<int64_t> index = digits ? ParseDecimalInt64(part) : std::nullopt;
    v = GetItem(v, index ? Value(*index) : Value(part));  // an index past int64: by name
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// The text a string filter gives back: a Markup stays one (str methods of Markup).
Value Same(const Value& input, std::string text) {
  return input.is_markup() ? Value::Markup(std::move(text)) : Value(std::move(text));
}

// str.split() with no arguments: runs of Python whitespace separate the parts.
std::vector<std::u32string> SplitWhitespace(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string current;
  for (char32_t c : s) {
    if (IsPySpace(c)) {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

bool IsBlank(const std::u32string& s) {  // s.strip() == ''
  return std::all_of(s.begin(), s.end(), IsPySpace);
}

// Filters whose Python algorithm copies the rest of the text per step (striptags per tag,
// wordwrap per piece of a long word) count the bytes they copy: past this many the input
// is refused instead of running for minutes.
constexpr uint64_t kMaxCopiedBytes = uint64_t{1} << 30;
void CountCopied(uint64_t& copied, size_t bytes, const char* filter) {
  copied += bytes;
  if (copied > kMaxCopiedBytes) Fail(std::string(filter) + ": the input needs too much copying (over 1 GiB)");
}

bool HasNonAscii(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

}  // namespace sinew::jinja
