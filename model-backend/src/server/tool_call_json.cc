#include "tool_call_json.h"

#include <boost/json.hpp>

namespace sinew::model::tool_json {
namespace {

namespace json = boost::json;

// Follows a byte-by-byte scan of JSON text: whether it is inside a string literal.
struct JsonStringTracker {
  bool in_string = false;
  bool escaped = false;
  // Feeds the next byte; true when it belongs to a string literal (its quotes included).
  bool Feed(char c) {
    if (!in_string) {
      in_string = c == '"';
      return in_string;
    }
    if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in_string = false;
    }
    return true;
  }
};

// End (one past) of the JSON value that starts at `start`, or npos when `text` ends
// before it does (a number at the very end may still grow, so it is unfinished too).
size_t JsonValueEnd(std::string_view text, size_t start) {
  if (start >= text.size()) return std::string_view::npos;
  const char first = text[start];
  if (first == '"' || first == '{' || first == '[') {
    int depth = 0;
    JsonStringTracker strings;
    for (size_t i = start; i < text.size(); ++i) {
      const char c = text[i];
      if (strings.Feed(c)) {
        if (!strings.in_string && depth == 0) return i + 1;  // a top-level string closed
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      return i;
    }
  }
  return std::string_view::npos;
}

// The string a complete JSON string literal stands for ("" if it is not one).
std::string DecodeString(std::string_view literal) {
  boost::system::error_code ec;
  json::value v = json::parse(literal, ec);
  return !ec && v.is_string() ? std::string(v.as_string()) : std::string();
}

// Arguments given as an object or as JSON text of an object -> compact JSON text.
bool ArgumentsText(const json::value* args, std::string& out) {
  if (args == nullptr) return false;
  json::value parsed = *args;
  if (args->is_string()) {
    boost::system::error_code ec;
    parsed = json::parse(args->as_string(), ec);
    if (ec) return false;
  }
  if (!parsed.is_object()) return false;
  out = json::serialize(parsed);
  return true;
}

// {"name"|"tool_name": ..., "arguments"|"parameters": ...} -> a call.
bool CallFromObject(const json::value& v, ToolCallOut& out) {
  if (!v.is_object()) return false;
  const json::object& o = v.as_object();
  const json::value* name = o.if_contains("name");
  if (name == nullptr) name = o.if_contains("tool_name");
  const json::value* args = o.if_contains("arguments");
  if (args == nullptr) args = o.if_contains("parameters");
  if (name == nullptr || !name->is_string() || !ArgumentsText(args, out.arguments)) return false;
  out.name = std::string(name->as_string());
  return true;
}

}  // namespace

std::string_view Trim(std::string_view s) {
  const std::string_view kSpace = " \t\n\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// JSON text without the whitespace outside strings. Byte by byte, so the compact form
// of a prefix is a prefix of the compact form of the whole.
std::string CompactJson(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  JsonStringTracker strings;
  for (char c : raw) {
    if (!strings.Feed(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) continue;
    out += c;
  }
  return out;
}

// Scans the call object {"name"|"tool_name": .., "arguments"|"parameters": ..} that
// starts at text[pos] == '{' as far as `text` goes: the name once its string is whole,
// the arguments object's compact text so far (given as a JSON string: once whole).
// Returns one past the object's end, or npos if it is unfinished or malformed.
size_t ScanCallObject(std::string_view text, size_t pos, PartialToolCall& out) {
  constexpr size_t npos = std::string_view::npos;
  std::string name_key, args_key;
  size_t i = pos + 1;
  while (true) {
    i = SkipSpace(text, i);
    if (i >= text.size()) return npos;
    if (text[i] == '}') return i + 1;
    if (text[i] != '"') return npos;
    const size_t key_end = JsonValueEnd(text, i);
    if (key_end == npos) return npos;
    const std::string key = DecodeString(text.substr(i, key_end - i));
    i = SkipSpace(text, key_end);
    if (i >= text.size() || text[i] != ':') return npos;
    i = SkipSpace(text, i + 1);
    if (i >= text.size()) return npos;
    const size_t value_end = JsonValueEnd(text, i);
    if ((key == "name" || key == "tool_name") && (key == "name" || name_key != "name") &&
        value_end != npos && text[i] == '"') {
      name_key = key;
      out.name = DecodeString(text.substr(i, value_end - i));
      out.has_name = true;
    }
    if ((key == "arguments" || key == "parameters") && (key == "arguments" || args_key != "arguments")) {
      args_key = key;
      if (text[i] == '{') {
        out.arguments = CompactJson(text.substr(i, value_end == npos ? npos : value_end - i));
      } else if (text[i] == '"' && value_end != npos) {
        out.arguments = CompactJson(DecodeString(text.substr(i, value_end - i)));
      }
    }
    if (value_end == npos) return npos;
    i = SkipSpace(text, value_end);
    if (i >= text.size()) return npos;
    if (text[i] == ',') {
      ++i;
    } else if (text[i] == '}') {
      return i + 1;
    } else {
      return npos;
    }
  }
}

// Scans the array of call objects that starts at text[pos] == '['. Returns one past
// its end, or npos if it is unfinished or malformed.
size_t ScanCallArray(std::string_view text, size_t pos, std::vector<PartialToolCall>& calls) {
  constexpr size_t npos = std::string_view::npos;
  size_t i = pos + 1;
  while (true) {
    i = SkipSpace(text, i);
    if (i >= text.size() || text[i] != '{') {
      return i < text.size() && text[i] == ']' ? i + 1 : npos;
    }
    PartialToolCall call;
    const size_t end = ScanCallObject(text, i, call);
    calls.push_back(std::move(call));
    if (end == npos) return npos;
    i = SkipSpace(text, end);
    if (i < text.size() && text[i] == ',') {
      ++i;
    } else {
      return i < text.size() && text[i] == ']' ? i + 1 : npos;
    }
  }
}

// A JSON arguments object that starts at text[i] (after whitespace) as far as it goes.
// Returns one past its end, or npos if unfinished (or not an object: `started` false).
size_t ScanArguments(std::string_view text, size_t i, PartialToolCall& call, bool* started) {
  i = SkipSpace(text, i);
  *started = i < text.size() && text[i] == '{';
  if (!*started) return std::string_view::npos;
  const size_t end = JsonValueEnd(text, i);
  call.arguments = CompactJson(text.substr(i, end == std::string_view::npos ? end : end - i));
  return end;
}

// The arguments as written (compact), from the scan of the same text.
bool ParseCall(std::string_view text, ToolCallOut& out) {
  text = Trim(text);
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !CallFromObject(v, out)) return false;
  PartialToolCall scanned;
  if (ScanCallObject(text, 0, scanned) != std::string_view::npos) out.arguments = scanned.arguments;
  return true;
}

// A JSON array of call objects (Mistral, Firefunction, Command R7B); false if any fails.
bool ParseCallArray(std::string_view text, std::vector<ToolCallOut>& calls) {
  boost::system::error_code ec;
  json::value v = json::parse(Trim(text), ec);
  if (ec || !v.is_array() || v.as_array().empty()) return false;
  std::vector<ToolCallOut> out;
  for (const json::value& item : v.as_array()) {
    ToolCallOut call;
    if (!CallFromObject(item, call)) return false;
    out.push_back(std::move(call));
  }
  std::vector<PartialToolCall> scanned;
  const std::string_view trimmed = Trim(text);
  if (ScanCallArray(trimmed, 0, scanned) != std::string_view::npos && scanned.size() == out.size()) {
    for (size_t i = 0; i < out.size(); ++i) out[i].arguments = scanned[i].arguments;
  }
  for (ToolCallOut& call : out) calls.push_back(std::move(call));
  return true;
}

}  // namespace sinew::model::tool_json
