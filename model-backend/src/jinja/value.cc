#include "value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <boost/json.hpp>

namespace sinew::jinja {

void Fail(std::string message) { throw JinjaError{std::move(message), 0}; }

std::string UndefinedMessage(const Value& undefined) {
  const std::string& hint = undefined.str();
  if (hint.empty()) return "value is undefined";
  if (hint.find(' ') != std::string::npos) return hint;
  return "'" + hint + "' is undefined";
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

Value CallArgs::GetOr(size_t index, std::string_view name, Value fallback) const {
  const Value* v = Get(index, name);
  return v ? *v : std::move(fallback);
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string name) {
  Value v;
  v.string_ = std::move(name);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), bool_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), int_(i) {}
Value::Value(double f) : kind_(Kind::kFloat), float_(f) {}
Value::Value(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}

Value Value::Markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value Value::List(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>(ListData{std::move(items), tuple});
  return v;
}
Value Value::Generator(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.list_->generator = true;
  return v;
}
Value Value::GroupTuple(Value grouper, Value list) {
  Value v = List({std::move(grouper), std::move(list)}, true);
  v.list_->group = true;
  return v;
}
Value Value::Dict(std::shared_ptr<DictData> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = dict ? std::move(dict) : std::make_shared<DictData>();
  return v;
}
Value Value::Namespace() {
  Value v = Dict();
  v.kind_ = Kind::kNamespace;
  return v;
}
Value Value::Func(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.string_ = std::move(name);
  v.function_ = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const boost::json::value& json) {
  switch (json.kind()) {
    case boost::json::kind::null:
      return None();
    case boost::json::kind::bool_:
      return Value(json.get_bool());
    case boost::json::kind::int64:
      return Value(json.get_int64());
    case boost::json::kind::uint64:
      return Value(static_cast<int64_t>(json.get_uint64()));
    case boost::json::kind::double_:
      return Value(json.get_double());
    case boost::json::kind::string:
      return Value(std::string(json.get_string()));
    case boost::json::kind::array: {
      std::vector<Value> items;
      for (const auto& item : json.get_array()) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case boost::json::kind::object: {
      auto dict = std::make_shared<DictData>();
      for (const auto& [key, item] : json.get_object()) dict->Set(std::string(key), FromJson(item));
      return Dict(std::move(dict));
    }
  }
  return None();
}

Value Value::Call(CallArgs& args) const {
  if (kind_ == Kind::kUndefined) {
    Fail(UndefinedMessage(*this));
  }
  if (kind_ != Kind::kFunction) Fail("'" + TypeName() + "' object is not callable");
  return (*function_)(args);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !string_.empty();
    case Kind::kList:
      return list_->generator || !list_->items.empty();
    case Kind::kDict:
      return !dict_->items.empty();
    case Kind::kFunction:
    case Kind::kNamespace:
      return true;
  }
  return false;
}

std::string FloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t int_len = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return sign + out;
}

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + static_cast<size_t>(len) > text.size()) len = 1;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out += cp;
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  for (char32_t cp : text) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Characters Python's repr() escapes although they are not ASCII control characters.
bool PyNonPrintable(char32_t c) {
  return (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) || c == 0x3000 ||
         c == 0xFEFF;
}

std::string StringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    char buf[16];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || PyNonPrintable(c)) {
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += EncodeUtf8(std::u32string(1, c));
    }
  }
  out += quote;
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void AppendJson(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  const std::string newline =
      indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close_newline =
      indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.bool_value() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.int_value());
      return;
    case Value::Kind::kFloat: {
      const double f = v.float_value();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : FloatRepr(f);
      return;
    }
    case Value::Kind::kString:
      out += JsonString(v.str());
      return;
    case Value::Kind::kList: {
      if (v.is_generator()) Fail("Object of type generator is not JSON serializable");
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[" + newline;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep + newline;
        AppendJson(items[i], indent, sort_keys, depth + 1, out);
      }
      out += close_newline + "]";
      return;
    }
    case Value::Kind::kDict: {
      auto items = v.dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += "{" + newline;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep + newline;
        out += JsonString(items[i].first) + ": ";
        AppendJson(items[i].second, indent, sort_keys, depth + 1, out);
      }
      out += close_newline + "}";
      return;
    }
    default:
      Fail("Object of type " + v.TypeName() + " is not JSON serializable");
  }
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return string_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FloatRepr(float_);
    case Kind::kString:
      return StringRepr(string_);
    case Kind::kList: {
      if (list_->generator) Fail("printing a generator object is not supported (apply |list first)");
      std::string out = list_->tuple ? "(" : "[";
      for (size_t i = 0; i < list_->items.size(); ++i) {
        if (i > 0) out += ", ";
        out += list_->items[i].Repr();
      }
      if (list_->tuple && list_->items.size() == 1) out += ",";
      return out + (list_->tuple ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i > 0) out += ", ";
        out += StringRepr(dict_->items[i].first) + ": " + dict_->items[i].second.Repr();
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kFunction:
      return "<function " + string_ + ">";
  }
  return "";
}

std::vector<Value> Value::Items() const {
  switch (kind_) {
    case Kind::kUndefined:
      return {};
    case Kind::kString: {
      std::vector<Value> out;
      for (char32_t c : DecodeUtf8(string_)) out.emplace_back(EncodeUtf8(std::u32string(1, c)));
      return out;
    }
    case Kind::kList:
      return list_->items;
    case Kind::kDict: {
      std::vector<Value> out;
      for (const auto& item : dict_->items) out.emplace_back(item.first);
      return out;
    }
    default:
      Fail("'" + TypeName() + "' object is not iterable");
  }
}

std::string Value::ToJson(int indent, bool sort_keys) const {
  std::string out;
  AppendJson(*this, indent, sort_keys, 0, out);
  return out;
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kFloat || other.kind_ == Kind::kFloat) {
      return float_value() == other.float_value();
    }
    return int_value() == other.int_value();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return string_ == other.string_;
    case Kind::kList: {
      const auto& a = list_->items;
      const auto& b = other.list_->items;
      if (list_->generator || other.list_->generator) return list_ == other.list_;
      if (list_->tuple != other.list_->tuple || a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].Equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->items.size() != other.dict_->items.size()) return false;
      for (const auto& [key, value] : dict_->items) {
        const Value* found = other.dict_->Find(key);
        if (found == nullptr || !value.Equals(*found)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return dict_ == other.dict_;
    case Kind::kFunction:
      return function_ == other.function_;
    default:
      return false;
  }
}

bool Value::Less(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kFloat || other.kind_ == Kind::kFloat) {
      return float_value() < other.float_value();
    }
    return int_value() < other.int_value();
  }
  if (kind_ == Kind::kString && other.kind_ == Kind::kString) return string_ < other.string_;
  if (kind_ == Kind::kList && other.kind_ == Kind::kList) {
    const auto& a = list_->items;
    const auto& b = other.list_->items;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!a[i].Equals(b[i])) return a[i].Less(b[i]);
    }
    return a.size() < b.size();
  }
  Fail("'<' not supported between instances of '" + TypeName() + "' and '" + other.TypeName() + "'");
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return list_->generator ? "generator" : list_->group ? "_GroupTuple" : list_->tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kFunction:
      return "function";
    case Kind::kNamespace:
      return "Namespace";
  }
  return "object";
}

std::optional<int64_t> ParseDecimalInt64(std::string_view digits) {
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return out;
}

double ParseFloatLiteral(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

}  // namespace sinew::jinja
