#include "methods.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <cctype>

#include "bounds.h"
#include "builtins.h"

namespace sinew::jinja {

std::string PyStrip(const std::string& s, const std::string& chars, bool left, bool right, bool has_chars) {
  const std::u32string text = DecodeUtf8(s);
  const std::u32string set = DecodeUtf8(chars);
  auto strip = [&](char32_t c) { return has_chars ? set.find(c) != std::u32string::npos : IsPySpace(c); };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && strip(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(text[end - 1])) --end;
  }
  return EncodeUtf8(std::u32string_view(text).substr(begin, end - begin));
}

namespace {

bool IsAscii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::u16string ToUtf16(const std::string& s) {
  std::u16string out;
  for (char32_t c : DecodeUtf8(s)) {
    if (c >= 0x10000) {
      out += static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10));
      out += static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF));
    } else {
      out += static_cast<char16_t>(c);
    }
  }
  return out;
}

std::string FromUtf16(const std::u16string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char16_t c = s[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
      out += static_cast<char32_t>(0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00));
      ++i;
    } else {
      out += c;
    }
  }
  return EncodeUtf8(out);
}

// Python's str.lower/upper and the titlecase of one character: Unicode's full case
// mappings (ß -> SS, final sigma), which ICU's root locale applies too.
enum class Case { kLower, kUpper, kTitle };
std::string MapCase(const std::string& s, Case to) {
  const std::u16string in = ToUtf16(s);
  std::u16string out(in.size() * 3 + 4, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  const auto* src = reinterpret_cast<const UChar*>(in.data());
  auto* dest = reinterpret_cast<UChar*>(out.data());
  const auto capacity = static_cast<int32_t>(out.size());
  const auto length = static_cast<int32_t>(in.size());
  const int32_t n = to == Case::kLower   ? u_strToLower(dest, capacity, src, length, "", &status)
                    : to == Case::kUpper ? u_strToUpper(dest, capacity, src, length, "", &status)
                                         : u_strToTitle(dest, capacity, src, length, nullptr, "", &status);
  if (U_FAILURE(status)) Fail(std::string("changing the case of a string failed: ") + u_errorName(status));
  out.resize(static_cast<size_t>(n));
  return FromUtf16(out);
}

}  // namespace

std::string PyLower(const std::string& s) {
  if (!IsAscii(s)) return MapCase(s, Case::kLower);
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
std::string PyUpper(const std::string& s) {
  if (!IsAscii(s)) return MapCase(s, Case::kUpper);
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
// The first character in titlecase, the rest lowercased (Python 3.8+).
std::string PyCapitalize(const std::string& s) {
  const std::u32string text = DecodeUtf8(s);
  if (text.empty()) return s;
  const std::string first = EncodeUtf8(text.substr(0, 1));
  const std::string lowered = PyLower(s);  // whole, for the final sigma's context
  const std::string first_lowered = PyLower(first);
  const std::string rest = lowered.starts_with(first_lowered) ? lowered.substr(first_lowered.size())
                                                              : PyLower(EncodeUtf8(text.substr(1)));
  return (IsAscii(first) ? PyUpper(first) : MapCase(first, Case::kTitle)) + rest;
}
// Jinja's title filter: the text split at runs of -, whitespace, (, {, [ and <; each
// part's first character upper-cased and the rest lower-cased.
std::string PyTitle(const std::string& s) {
  const std::u32string text = DecodeUtf8(s);
  auto separator = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c); };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    const bool sep = separator(text[i]);
    while (j < text.size() && separator(text[j]) == sep) ++j;
    if (sep) {
      out += EncodeUtf8(text.substr(i, j - i));
    } else {
      out += PyUpper(EncodeUtf8(text.substr(i, 1))) + PyLower(EncodeUtf8(text.substr(i + 1, j - i - 1)));
    }
    i = j;
  }
  return out;
}

bool PyIsLower(const std::string& s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    const auto cp = static_cast<UChar32>(c);
    if (u_isUUppercase(cp) || u_istitle(cp)) return false;
    cased = cased || u_isULowercase(cp);
  }
  return cased;
}
bool PyIsUpper(const std::string& s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    const auto cp = static_cast<UChar32>(c);
    if (u_isULowercase(cp) || u_istitle(cp)) return false;
    cased = cased || u_isUUppercase(cp);
  }
  return cased;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between characters and at both ends
    const std::u32string text = DecodeUtf8(s);
    int64_t done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
        CheckTextSize(out.size());
      }
      out += EncodeUtf8(std::u32string(1, c));
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old, pos);
    if (found == std::string::npos) break;
    out += s.substr(pos, found - pos) + with;
    CheckTextSize(out.size());
    pos = found + old.size();
    ++done;
  }
  return out + s.substr(pos);
}

std::vector<std::string> PySplitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::string current;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const std::string_view rest = std::string_view(s).substr(i);
    // U+0085, U+2028 and U+2029 end lines too.
    const size_t unicode_break = rest.starts_with("\xC2\x85") ? 2
                                 : (rest.starts_with("\xE2\x80\xA8") || rest.starts_with("\xE2\x80\xA9")) ? 3
                                                                                                    : 0;
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1e') || unicode_break > 0) {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      if (unicode_break > 0) i += unicode_break - 1;
      lines.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

bool Contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!needle.is_string()) Fail("'in <string>' requires string as left operand, not " + needle.TypeName());
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kList:
      return std::any_of(haystack.list().items.begin(), haystack.list().items.end(),
                         [&](const Value& item) { return item.Equals(needle); });
    case Value::Kind::kDict:
      return needle.is_string() && haystack.dict().Find(needle.str()) != nullptr;
    default:
      Fail("argument of type '" + haystack.TypeName() + "' is not iterable");
  }
}

namespace {

std::vector<Value> PySplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<Value> out;
  if (sep == nullptr || sep->is_none()) {
    const std::u32string text = DecodeUtf8(s);
    size_t i = 0;
    while (true) {
      while (i < text.size() && IsPySpace(text[i])) ++i;
      if (i >= text.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t end = text.size();
        while (end > i && IsPySpace(text[end - 1])) --end;
        out.emplace_back(EncodeUtf8(text.substr(i, end - i)));
        break;
      }
      size_t j = i;
      while (j < text.size() && !IsPySpace(text[j])) ++j;
      out.emplace_back(EncodeUtf8(text.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  const std::string& delim = sep->str();
  if (delim.empty()) Fail("empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t found = s.find(delim, pos);
    if (found == std::string::npos) break;
    out.emplace_back(s.substr(pos, found - pos));
    pos = found + delim.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  if (affix.is_list()) {
    return std::any_of(affix.list().items.begin(), affix.list().items.end(),
                       [&](const Value& a) { return AffixMatch(s, a, prefix); });
  }
  if (!affix.is_string()) Fail("startswith/endswith arg must be str or a tuple of str");
  return prefix ? s.starts_with(affix.str()) : s.ends_with(affix.str());
}

template <typename Pred>
bool AllChars(const std::string& s, Pred pred) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); });
}

std::optional<Value> StringMethod(const std::string& s, const std::string& name) {
  auto bind = [&](auto fn) { return Value::Func(name, [s, fn](CallArgs& a) -> Value { return fn(s, a); }); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([left, right](const std::string& str, CallArgs& a) {
      const Value* chars = a.Get(0, "chars");
      const bool has = chars && !chars->is_none();
      return Value(PyStrip(str, has ? chars->str() : "", left, right, has));
    });
  }
  if (name == "split") {
    return bind([](const std::string& str, CallArgs& a) {
      const Value* maxsplit = a.Get(1, "maxsplit");
      return Value::List(PySplit(str, a.Get(0, "sep"), maxsplit ? maxsplit->int_value() : -1));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bind([prefix](const std::string& str, CallArgs& a) {
      if (a.positional.empty()) Fail("startswith/endswith takes at least 1 argument");
      return Value(AffixMatch(str, a.positional[0], prefix));
    });
  }
  if (name == "lower") return bind([](const std::string& str, CallArgs&) { return Value(PyLower(str)); });
  if (name == "upper") return bind([](const std::string& str, CallArgs&) { return Value(PyUpper(str)); });
  if (name == "capitalize") {
    return bind([](const std::string& str, CallArgs&) { return Value(PyCapitalize(str)); });
  }
  if (name == "replace") {
    return bind([](const std::string& str, CallArgs& a) {
      if (a.positional.size() < 2) Fail("replace expected at least 2 arguments");
      const Value* count = a.Get(2, "count");
      return Value(PyReplace(str, a.positional[0].Str(), a.positional[1].Str(), count ? count->int_value() : -1));
    });
  }
  if (name == "find") {
    return bind([](const std::string& str, CallArgs& a) {
      if (a.positional.empty()) Fail("find expected 1 argument");
      const size_t at = str.find(a.positional[0].Str());
      if (at == std::string::npos) return Value(static_cast<int64_t>(-1));
      return Value(static_cast<int64_t>(DecodeUtf8(str.substr(0, at)).size()));
    });
  }
  if (name == "join") {
    return bind([](const std::string& str, CallArgs& a) {
      if (a.positional.empty()) Fail("join expected 1 argument");
      std::string out;
      bool first = true;
      for (const Value& item : a.positional[0].Items()) {
        if (!item.is_string()) Fail("sequence item: expected str instance, " + item.TypeName() + " found");
        if (!first) out += str;
        first = false;
        out += item.str();
        CheckTextSize(out.size());
      }
      return Value(out);
    });
  }
  if (name == "isdigit") return bind([](const std::string& str, CallArgs&) { return Value(AllChars(str, ::isdigit)); });
  if (name == "isalpha") return bind([](const std::string& str, CallArgs&) { return Value(AllChars(str, ::isalpha)); });
  if (name == "isalnum") return bind([](const std::string& str, CallArgs&) { return Value(AllChars(str, ::isalnum)); });
  if (name == "isspace") return bind([](const std::string& str, CallArgs&) { return Value(AllChars(str, ::isspace)); });
  return std::nullopt;
}

std::optional<Value> DictMethod(const Value& dict, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::Func(name, [dict, name](CallArgs&) {
      std::vector<Value> out;
      for (const auto& [key, value] : dict.dict().items) {
        if (name == "items") out.push_back(Value::List({Value(key), value}, true));
        if (name == "keys") out.emplace_back(key);
        if (name == "values") out.push_back(value);
      }
      return Value::List(std::move(out));
    });
  }
  if (name == "get") {
    return Value::Func(name, [dict](CallArgs& a) {
      if (a.positional.empty()) Fail("get expected at least 1 argument");
      const Value* fallback = a.Get(1, "default");
      const Value* found = a.positional[0].is_string() ? dict.dict().Find(a.positional[0].str()) : nullptr;
      if (found) return *found;
      return fallback ? *fallback : Value::None();
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> Method(const Value& object, const std::string& name) {
  if (object.is_string()) return StringMethod(object.str(), name);
  if (object.kind() == Value::Kind::kDict) return DictMethod(object, name);
  return std::nullopt;
}

Value GetAttr(const Value& object, const std::string& name) {
  if (object.is_undefined()) {
    Fail(UndefinedMessage(object));
  }
  if (std::optional<Value> method = Method(object, name)) return *method;
  if (object.is_group() && (name == "grouper" || name == "list")) return object.list().items[name == "grouper" ? 0 : 1];
  if (object.is_mapping()) {
    if (const Value* found = object.dict().Find(name)) return *found;
  }
  return Value::Undefined("'" + object.TypeName() + " object' has no attribute '" + name + "'");
}

Value GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) {
    Fail(UndefinedMessage(object));
  }
  if (object.is_mapping() && key.is_string()) {
    if (const Value* found = object.dict().Find(key.str())) return *found;
  }
  if (object.is_generator()) Fail("'generator' object is not subscriptable");
  if ((object.is_list() || object.is_string()) && (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    if (object.is_list()) {
      const auto& items = object.list().items;
      int64_t index = key.int_value();
      if (index < 0) index += static_cast<int64_t>(items.size());
      if (index >= 0 && index < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(index)];
    } else {
      const std::u32string text = DecodeUtf8(object.str());
      int64_t index = key.int_value();
      if (index < 0) index += static_cast<int64_t>(text.size());
      if (index >= 0 && index < static_cast<int64_t>(text.size())) {
        return Value(EncodeUtf8(std::u32string(1, text[static_cast<size_t>(index)])));
      }
    }
  }
  if (key.is_string()) {
    if (std::optional<Value> method = Method(object, key.str())) return *method;
    if (object.is_group()) return GetAttr(object, key.str());
  }
  return Value::Undefined("'" + object.TypeName() + " object' has no element " + key.Repr());
}

Value GetSlice(const Value& object, const Value* start_v, const Value* stop_v, const Value* step_v) {
  if (object.is_undefined()) Fail(UndefinedMessage(object));
  if (object.is_generator()) Fail("'generator' object is not subscriptable");
  if (!object.is_list() && !object.is_string()) Fail("'" + object.TypeName() + "' object is not subscriptable");
  auto given = [](const Value* v) { return v != nullptr && !v->is_none(); };
  const int64_t step = given(step_v) ? step_v->int_value() : 1;
  if (step == 0) Fail("slice step cannot be zero");
  const std::u32string text = object.is_string() ? DecodeUtf8(object.str()) : std::u32string();
  const int64_t n = static_cast<int64_t>(object.is_string() ? text.size() : object.list().items.size());
  auto clamp = [&](const Value* v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t i = v->int_value();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(stop_v, step > 0 ? n : -1);
  std::vector<Value> items;
  std::u32string chars;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (object.is_string()) {
      chars += text[static_cast<size_t>(i)];
    } else {
      items.push_back(object.list().items[static_cast<size_t>(i)]);
    }
  }
  if (object.is_string()) return Value(EncodeUtf8(chars));
  return Value::List(std::move(items), object.list().tuple);
}

}  // namespace sinew::jinja
