// Jinja2's filters of HTML and URLs: striptags, forceescape, urlencode, urlize and xmlattr,
// each as its Python counterpart gives it (text_filters.h says how closely).
#include "markup_filters.h"

#include <algorithm>
#include <string>

#include <boost/regex.hpp>

#include "bounds.h"
#include "filter_util.h"
#include "methods.h"

namespace sinew::jinja {

namespace {

// html.unescape for the character references this renderer knows: numeric ones and
// &amp; &lt; &gt; &quot; &apos; &nbsp;. Any other named reference is an error (Python
// consults the full HTML5 table).
std::string HtmlUnescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    const size_t start = i;
    ++i;
    if (i < s.size() && s[i] == '#') {
      size_t j = i + 1;
      const bool hex = j < s.size() && (s[j] == 'x' || s[j] == 'X');
      if (hex) ++j;
      const size_t digits_start = j;
      while (j < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[j])) : std::isdigit(static_cast<unsigned char>(s[j])))) ++j;
      if (j == digits_start) {
        out += "&";
        continue;
      }
      uint64_t code = 0;
      bool huge = false;
      for (size_t k = digits_start; k < j; ++k) {
        const char c = s[k];
        code = code * (hex ? 16 : 10) + static_cast<uint64_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
        if (code > 0x10FFFF) huge = true;
        if (huge) code = 0x110000;
      }
      if (j < s.size() && s[j] == ';') ++j;
      if (huge || (code >= 0xD800 && code <= 0xDFFF)) {
        out += "\xEF\xBF\xBD";
      } else if (code < 0x20 ? !(code == 9 || code == 10 || code == 12) : (code >= 0x7F && code <= 0x9F) ||
                                                                           (code >= 0xFDD0 && code <= 0xFDEF) ||
                                                                           (code & 0xFFFE) == 0xFFFE) {
        Fail("striptags: the character reference '" + s.substr(start, j - start) + "' is not supported");
      } else {
        out += EncodeUtf8(std::u32string(1, static_cast<char32_t>(code)));
      }
      i = j;
      continue;
    }
    size_t j = i;
    while (j < s.size() && j - i < 32 && std::string_view("\t\n\f <&#;").find(s[j]) == std::string_view::npos) ++j;
    if (j == i) {
      out += "&";
      continue;
    }
    const std::string name = s.substr(i, j - i);
    static const std::pair<const char*, const char*> kNamed[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
    bool done = false;
    if (j < s.size() && s[j] == ';') {
      for (const auto& [entity, text] : kNamed) {
        if (name == entity) {
          out += text;
          i = j + 1;
          done = true;
        }
      }
    }
    if (!done) Fail("striptags: the character reference '&" + name + "' is not supported");
  }
  return out;
}

// Removes each `open`...`close` span, leftmost first, as markupsafe does.
std::string RemoveSpans(std::string s, std::string_view open, std::string_view close) {
  uint64_t copied = 0;
  while (true) {
    const size_t start = s.find(open);
    if (start == std::string::npos) return s;
    const size_t end = s.find(close, start);
    if (end == std::string::npos) return s;
    CountCopied(copied, s.size(), "striptags");
    s.erase(start, end + close.size() - start);
  }
}

}  // namespace

Value FilterStriptags(const Value& v, const CallArgs&) {
  const std::string text = RemoveSpans(RemoveSpans(v.Str(), "<!--", "-->"), "<", ">");
  std::string joined;
  for (const std::u32string& word : SplitWhitespace(DecodeUtf8(text))) {
    if (!joined.empty()) joined += ' ';
    joined += Utf8(word);
  }
  return Value(HtmlUnescape(joined));
}

Value FilterForceescape(const Value& v, const CallArgs&) { return Value::Markup(HtmlEscape(v.Str())); }

namespace {

// urllib.parse.quote of the UTF-8 bytes: letters, digits, "_.-~" and `safe` stay.
std::string UrlQuote(const std::string& s, bool for_query) {
  std::string out;
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (std::isalnum(b) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query)) {
      out += c;
    } else if (c == ' ' && for_query) {
      out += '+';
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", b);
      out += buf;
    }
  }
  return out;
}

}  // namespace

Value FilterUrlencode(const Value& v, const CallArgs&) {
  if (v.is_string() || !(v.is_list() || v.is_mapping() || v.is_undefined())) return Value(UrlQuote(v.Str(), false));
  std::string out;
  auto add = [&](const Value& key, const Value& value) {
    if (!out.empty()) out += '&';
    out += UrlQuote(key.Str(), true) + "=" + UrlQuote(value.Str(), true);
    CheckTextSize(out.size());
  };
  if (v.kind() == Value::Kind::kDict) {
    for (const auto& [key, value] : v.dict().items) add(Value(key), value);
    return Value(std::move(out));
  }
  for (const Value& item : v.Items()) {
    if (!(item.is_list() || item.is_string()) || item.is_generator()) Fail("cannot unpack non-iterable " + item.TypeName() + " object");
    const std::vector<Value> pair = item.Items();
    if (pair.size() != 2) Fail("urlencode: each item must be a (key, value) pair");
    add(pair[0], pair[1]);
  }
  return Value(std::move(out));
}

namespace {

const boost::regex& HttpPattern() {
  static const boost::regex pattern(
      R"(^(((https?://|www\.)(([\w%-]+\.)+)?([a-z]{2,63}|xn--[\w%]{2,59}))|(([\w%-]{2,63}\.)+(com|net|int|edu|gov|org|info|mil))|((https?://)((([\d]{1,3})(\.[\d]{1,3}){3})|(\[([\da-f]{0,4}:){2}([\da-f]{0,4}:?){1,6}\]))))(?::[\d]{1,5})?(?:[/?#]\S*)?$)",
      boost::regex::perl | boost::regex::icase);
  return pattern;
}
const boost::regex& EmailPattern() {
  static const boost::regex pattern(R"(^\S+@\w[\w.-]*\.\w+$)", boost::regex::perl);
  return pattern;
}

bool FullMatch(const std::string& s, const boost::regex& pattern) {
  try {
    return boost::regex_match(s, pattern);
  } catch (const std::runtime_error&) {
    Fail("urlize: the text is too complex to match");
  }
}

size_t CountOf(const std::string& s, std::string_view what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

bool StartsWithAny(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return s.starts_with(p); });
}

// jinja2.utils.urlize on one word.
std::string UrlizeWord(std::string middle, const std::string& rel_attr, const std::string& target_attr,
                       const Value& trim_limit, const std::vector<std::string>& extra_schemes) {
  std::string head, tail;
  while (true) {
    if (StartsWithAny(middle, {"(", "<"})) {
      head += middle[0];
      middle.erase(0, 1);
    } else if (middle.starts_with("&lt;")) {
      head += "&lt;";
      middle.erase(0, 4);
    } else {
      break;
    }
  }
  while (!middle.empty()) {
    if (middle.ends_with("&gt;")) {
      tail.insert(0, "&gt;");
      middle.resize(middle.size() - 4);
    } else if (std::string_view(")>.,\n").find(middle.back()) != std::string_view::npos) {
      tail.insert(0, 1, middle.back());
      middle.pop_back();
    } else {
      break;
    }
  }
  for (const auto& [open, close] : {std::pair<std::string_view, std::string_view>{"(", ")"}, {"<", ">"}, {"&lt;", "&gt;"}}) {
    const size_t opens = CountOf(middle, open);
    if (opens <= CountOf(middle, close)) continue;
    const size_t moves = std::min(opens, CountOf(tail, close));
    for (size_t k = 0; k < moves; ++k) {
      const size_t end = tail.find(close) + close.size();
      middle += tail.substr(0, end);
      tail.erase(0, end);
    }
  }
  if (HasNonAscii(middle) && middle.find_first_of(".@:") != std::string::npos) {
    Fail("urlize: a link candidate with non-ASCII characters is not supported");  // Python's \w is Unicode
  }
  auto trim = [&](const std::string& url) {
    if (trim_limit.is_none()) return url;
    const int64_t limit = IntArg(trim_limit, "urlize");
    if (static_cast<int64_t>(url.size()) > limit) return url.substr(0, static_cast<size_t>(std::max<int64_t>(limit, 0))) + "...";
    return url;
  };
  if (FullMatch(middle, HttpPattern())) {
    const std::string href = StartsWithAny(middle, {"https://", "http://"}) ? middle : "https://" + middle;
    middle = "<a href=\"" + href + "\"" + rel_attr + target_attr + ">" + trim(middle) + "</a>";
  } else if (middle.starts_with("mailto:") && FullMatch(middle.substr(7), EmailPattern())) {
    middle = "<a href=\"" + middle + "\">" + middle.substr(7) + "</a>";
  } else if (middle.find('@') != std::string::npos && !middle.starts_with("www.") && !middle.starts_with("@") &&
             middle.find(':') == std::string::npos && FullMatch(middle, EmailPattern())) {
    middle = "<a href=\"mailto:" + middle + "\">" + middle + "</a>";
  } else {
    for (const std::string& scheme : extra_schemes) {
      if (middle != scheme && middle.starts_with(scheme)) {
        middle = "<a href=\"" + middle + "\"" + rel_attr + target_attr + ">" + middle + "</a>";
      }
    }
  }
  return head + middle + tail;
}

std::string EscapeValue(const Value& v) { return v.is_markup() ? v.str() : HtmlEscape(v.Str()); }

}  // namespace

Value FilterUrlize(const Value& v, const CallArgs& args) {
  const Value trim_limit = args.GetOr(0, "trim_url_limit", Value::None());
  const bool nofollow = args.GetOr(1, "nofollow", Value(false)).Truthy();
  const Value target = args.GetOr(2, "target", Value::None());
  const Value rel = args.GetOr(3, "rel", Value::None());
  const Value schemes = args.GetOr(4, "extra_schemes", Value::None());
  std::set<std::string> rel_parts;
  if (rel.Truthy()) {
    for (const std::u32string& part : SplitWhitespace(Text(rel))) rel_parts.insert(Utf8(part));
  }
  if (nofollow) rel_parts.insert("nofollow");
  rel_parts.insert("noopener");  // Jinja's policy urlize.rel
  std::string rel_text;
  for (const std::string& part : rel_parts) rel_text += (rel_text.empty() ? "" : " ") + part;
  std::vector<std::string> extra;
  if (!schemes.is_none()) {
    static const boost::regex kScheme(R"(^([\w.+-]{2,}:(/){0,2})$)", boost::regex::perl);
    for (const Value& scheme : schemes.Items()) {
      if (HasNonAscii(scheme.Str()) || !boost::regex_match(scheme.Str(), kScheme)) {
        Fail(scheme.Repr() + " is not a valid URI scheme prefix.");
      }
      extra.push_back(scheme.Str());
    }
  }
  const std::string rel_attr = " rel=\"" + HtmlEscape(rel_text) + "\"";
  const std::string target_attr = target.Truthy() ? " target=\"" + EscapeValue(target) + "\"" : "";
  // re.split(r"(\s+)", escape(text)): words and the whitespace between them.
  const std::u32string text = DecodeUtf8(EscapeValue(v));
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    const bool space = IsPySpace(text[i]);
    while (j < text.size() && IsPySpace(text[j]) == space) ++j;
    const std::string word = Utf8(text.substr(i, j - i));
    out += space ? word : UrlizeWord(word, rel_attr, target_attr, trim_limit, extra);
    CheckTextSize(out.size());
    i = j;
  }
  return Value(std::move(out));
}

Value FilterXmlattr(const Value& v, const CallArgs& args) {
  const bool autospace = args.GetOr(0, "autospace", Value(true)).Truthy();
  if (v.kind() != Value::Kind::kDict) Fail("xmlattr: expected a mapping, got '" + v.TypeName() + "'");
  std::string out;
  for (const auto& [key, value] : v.dict().items) {
    if (value.is_none() || value.is_undefined()) continue;
    if (key.find_first_of(" \t\n\r\f\v/>=") != std::string::npos) {
      Fail("Invalid character in attribute name: " + Value(key).Repr());
    }
    if (!out.empty()) out += ' ';
    out += HtmlEscape(key) + "=\"" + EscapeValue(value) + "\"";
    CheckTextSize(out.size());
  }
  if (autospace && !out.empty()) out.insert(0, " ");
  return Value(std::move(out));
}

}  // namespace sinew::jinja
