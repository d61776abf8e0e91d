#include "tool_calls.h"

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

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

// Llama 3.1 built-in tools: name.call(key="value", n=1) -> {"key": "value", "n": 1}.
bool ParsePythonCall(std::string_view text, ToolCallOut& out) {
  text = Trim(text);
  const size_t dot = text.find(".call(");
  if (dot == std::string_view::npos || text.back() != ')') return false;
  out.name = std::string(text.substr(0, dot));
  std::string_view rest = text.substr(dot + 6, text.size() - dot - 7);
  json::object args;
  while (!Trim(rest).empty()) {
    rest = Trim(rest);
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string key(Trim(rest.substr(0, eq)));
    rest = Trim(rest.substr(eq + 1));
    size_t end = 0;
    if (!rest.empty() && (rest[0] == '"' || rest[0] == '\'')) {
      end = rest.find(rest[0], 1);
      if (end == std::string_view::npos) return false;
      args[key] = std::string(rest.substr(1, end - 1));
      ++end;
    } else {
      end = std::min(rest.find(','), rest.size());
      boost::system::error_code ec;
      json::value v = json::parse(Trim(rest.substr(0, end)), ec);
      if (ec) return false;
      args[key] = v;
    }
    rest = rest.substr(end);
    rest = Trim(rest);
    if (!rest.empty() && rest[0] == ',') rest.remove_prefix(1);
  }
  out.arguments = json::serialize(args);
  return true;
}

// Finds open ... close pairs; each body goes to `parse`; the rest is content.
template <typename Parse>
ParsedToolOutput ParseDelimited(std::string_view text, std::string_view open, std::string_view close,
                                Parse parse) {
  ParsedToolOutput out;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, start - pos);
    const size_t body = start + open.size();
    const size_t end = close.empty() ? std::string_view::npos : text.find(close, body);
    const size_t body_end = end == std::string_view::npos ? text.size() : end;
    if (!parse(text.substr(body, body_end - body), out.calls)) {
      content += text.substr(start, body_end - start);
      if (end != std::string_view::npos) content += close;
    }
    pos = end == std::string_view::npos ? text.size() : end + close.size();
  }
  out.content = std::string(Trim(content));
  return out;
}

bool OneJsonCall(std::string_view body, std::vector<ToolCallOut>& calls) {
  ToolCallOut call;
  if (!ParseCall(body, call)) return false;
  calls.push_back(std::move(call));
  return true;
}

ParsedToolOutput ParseLlama3(std::string_view text) {
  ParsedToolOutput out;
  std::string_view body = Trim(text);
  const size_t tag = body.find("<|python_tag|>");
  std::string content;
  if (tag != std::string_view::npos) {
    content = std::string(Trim(body.substr(0, tag)));
    body = Trim(body.substr(tag + 14));
  }
  ToolCallOut call;
  if (ParseCall(body, call) || (tag != std::string_view::npos && ParsePythonCall(body, call))) {
    out.calls.push_back(std::move(call));
    out.content = content;
  } else {
    out.content = std::string(Trim(text));
  }
  return out;
}

// Functionary v3.2: the prompt ends with ">>>", so the output is "name\n{...}" segments
// joined by ">>>"; the segment "all" is content.
ParsedToolOutput ParseFunctionaryV32(std::string_view text) {
  ParsedToolOutput out;
  std::string all(text);
  if (!all.starts_with(">>>")) all = ">>>" + all;
  std::string content;
  size_t pos = 0;
  while (pos < all.size()) {
    const size_t start = pos + 3;
    size_t next = all.find(">>>", start);
    if (next == std::string::npos) next = all.size();
    const std::string_view segment = std::string_view(all).substr(start, next - start);
    const size_t newline = segment.find('\n');
    const std::string_view name = Trim(segment.substr(0, newline));
    const std::string_view body = newline == std::string_view::npos ? "" : segment.substr(newline + 1);
    if (name == "all") {
      content += body;
    } else if (!name.empty()) {
      boost::system::error_code ec;
      json::value args = json::parse(Trim(body), ec);
      if (!ec && args.is_object()) {
        out.calls.push_back({std::string(name), CompactJson(Trim(body))});
      } else {
        content += segment;
      }
    }
    pos = next;
  }
  out.content = std::string(Trim(content));
  return out;
}

ParsedToolOutput ParseCommandR(std::string_view text) {
  std::string rest(text);
  std::string reasoning;
  auto cut = [&](std::string_view open, std::string_view close, std::string* into) {
    const size_t a = rest.find(open);
    if (a == std::string::npos) return;
    const size_t b = rest.find(close, a + open.size());
    const size_t end = b == std::string::npos ? rest.size() : b;
    if (into) *into = std::string(Trim(std::string_view(rest).substr(a + open.size(), end - a - open.size())));
    rest.erase(a, (b == std::string::npos ? rest.size() : b + close.size()) - a);
  };
  cut("<|START_THINKING|>", "<|END_THINKING|>", &reasoning);
  std::string response;
  const bool has_response = rest.find("<|START_RESPONSE|>") != std::string::npos;
  cut("<|START_RESPONSE|>", "<|END_RESPONSE|>", &response);
  ParsedToolOutput out = ParseDelimited(rest, "<|START_ACTION|>", "<|END_ACTION|>", ParseCallArray);
  if (has_response) out.content = std::string(Trim(response + "\n" + out.content));
  out.reasoning = reasoning;
  return out;
}

ParsedToolOutput ParseDeepSeekR1(std::string_view text) {
  const std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
  const size_t begin = text.find(kCallsBegin);
  if (begin == std::string_view::npos) return {std::string(Trim(text)), {}, {}};
  ParsedToolOutput calls = ParseDelimited(
      text.substr(begin + kCallsBegin.size()), "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
      [](std::string_view body, std::vector<ToolCallOut>& out) {
        const std::string_view kSep = "<｜tool▁sep｜>";
        const size_t sep = body.find(kSep);
        if (sep == std::string_view::npos) return false;
        body = body.substr(sep + kSep.size());
        const size_t newline = body.find('\n');
        if (newline == std::string_view::npos) return false;
        ToolCallOut call;
        call.name = std::string(Trim(body.substr(0, newline)));
        std::string_view args = Trim(body.substr(newline + 1));
        if (args.starts_with("```json")) args.remove_prefix(7);
        if (args.starts_with("```")) args.remove_prefix(3);
        if (args.ends_with("```")) args.remove_suffix(3);
        boost::system::error_code ec;
        json::value v = json::parse(Trim(args), ec);
        if (ec || !v.is_object() || call.name.empty()) return false;
        call.arguments = CompactJson(Trim(args));
        out.push_back(std::move(call));
        return true;
      });
  ParsedToolOutput out;
  out.calls = std::move(calls.calls);
  out.content = std::string(Trim(text.substr(0, begin)));
  return out;
}

// Text at which a call of `format` starts (streaming holds from there on).
std::vector<std::string_view> StartMarkers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return {"<tool_call>"};
    case ToolCallFormat::kLlama3Json: return {"<|python_tag|>"};
    case ToolCallFormat::kMistral: return {"[TOOL_CALLS]"};
    case ToolCallFormat::kFunctionaryV31: return {"<function="};
    case ToolCallFormat::kFirefunction: return {"functools["};
    case ToolCallFormat::kDeepSeekR1: return {"<｜tool▁calls▁begin｜>"};
    case ToolCallFormat::kFunctionaryV32:
    case ToolCallFormat::kCommandR7B:
      break;
  }
  return {};
}

}  // namespace

ForcedToolCall PlanForcedToolCall(const GenerationRequest& request, ToolCallFormat format) {
  ForcedToolCall plan;
  auto json_lead = [](std::string_view before, const std::string& name, std::string_view args_key) {
    return std::string(before) + "{\"name\":" + json::serialize(json::string(name)) + ",\"" +
           std::string(args_key) + "\":";
  };
  for (const ToolSpec& tool : request.tools) {
    if (request.tool_choice == ToolChoice::kNamed && tool.name != request.tool_choice_name) continue;
    FramedJson alt{"", tool.parameters, ""};
    switch (format) {
      case ToolCallFormat::kHermes:
        plan.frame = {"<tool_call>\n", "\n</tool_call>"};
        alt.lead = json_lead("", tool.name, "arguments");
        alt.trail = "}";
        break;
      case ToolCallFormat::kLlama3Json:
        alt.lead = json_lead("", tool.name, "parameters");
        alt.trail = "}";
        break;
      case ToolCallFormat::kMistral:
        plan.frame = {"[TOOL_CALLS]", ""};
        alt.lead = json_lead("[", tool.name, "arguments");
        alt.trail = "}]";
        break;
      case ToolCallFormat::kFirefunction:
        plan.frame = {" functools", ""};
        alt.lead = json_lead("[", tool.name, "arguments");
        alt.trail = "}]";
        break;
      case ToolCallFormat::kFunctionaryV31:
        plan.frame = {"<function=", "</function>"};
        alt.lead = tool.name + ">";
        break;
      case ToolCallFormat::kFunctionaryV32:
        alt.lead = tool.name + "\n";
        break;
      case ToolCallFormat::kCommandR7B:
        plan.frame = {"<|START_ACTION|>", "<|END_ACTION|>"};
        alt.lead = "[{\"tool_call_id\":\"0\",\"tool_name\":" +
                   json::serialize(json::string(tool.name)) + ",\"parameters\":";
        alt.trail = "}]";
        break;
      case ToolCallFormat::kDeepSeekR1:
        plan.frame = {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
        alt.lead = tool.name + "\n```json\n";
        alt.trail = "\n```";
        break;
    }
    plan.alternatives.push_back(std::move(alt));
  }
  return plan;
}

ParsedToolOutput ParseToolCallsOf(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ParseDelimited(text, "<tool_call>", "</tool_call>", OneJsonCall);
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3(text);
    case ToolCallFormat::kMistral:
      return ParseDelimited(text, "[TOOL_CALLS]", "", ParseCallArray);
    case ToolCallFormat::kFirefunction:
      return ParseDelimited(text, "functools", "", ParseCallArray);
    case ToolCallFormat::kFunctionaryV31: {
      ParsedToolOutput out;
      std::string content;
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t start = text.find("<function=", pos);
        const size_t name_end = start == std::string_view::npos ? start : text.find('>', start);
        const size_t end = name_end == std::string_view::npos ? name_end : text.find("</function>", name_end);
        if (end == std::string_view::npos) {
          content += text.substr(pos);
          break;
        }
        content += text.substr(pos, start - pos);
        boost::system::error_code ec;
        const std::string_view body = Trim(text.substr(name_end + 1, end - name_end - 1));
        json::value args = json::parse(body, ec);
        if (!ec && args.is_object()) {
          out.calls.push_back({std::string(text.substr(start + 10, name_end - start - 10)), CompactJson(body)});
        } else {
          content += text.substr(start, end + 11 - start);
        }
        pos = end + 11;
      }
      out.content = std::string(Trim(content));
      return out;
    }
    case ToolCallFormat::kFunctionaryV32:
      return ParseFunctionaryV32(text);
    case ToolCallFormat::kCommandR7B:
      return ParseCommandR(text);
    case ToolCallFormat::kDeepSeekR1:
      return ParseDeepSeekR1(text);
  }
  return {std::string(Trim(text)), {}, {}};
}

ParsedToolOutput ParseToolCalls(std::string_view text, ToolCallFormat format,
                                const ToolCallFrame* forced) {
  if (forced == nullptr) return ParseToolCallsOf(text, format);
  ParsedToolOutput out = ParseToolCallsOf(forced->open + std::string(text) + forced->close, format);
  if (out.calls.empty()) out.content = std::string(Trim(text));  // not the prompt's markup
  return out;
}

namespace {

// Every `open` ... body (scanned by `scan` from after `open`) in `text`.
template <typename Scan>
void ScanEach(std::string_view text, std::string_view open, Scan scan) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos) return;
    const size_t end = scan(start + open.size());
    if (end == std::string_view::npos) return;
    pos = std::max(end, start + open.size());
  }
}

}  // namespace

std::vector<PartialToolCall> ScanPartialToolCalls(std::string_view text, ToolCallFormat format) {
  constexpr size_t npos = std::string_view::npos;
  std::vector<PartialToolCall> calls;
  // A call object at text[i] (after whitespace); npos when unfinished.
  auto object_at = [&](size_t i) -> size_t {
    i = SkipSpace(text, i);
    if (i >= text.size()) return npos;
    if (text[i] != '{') return i;  // not a call: look for the next one
    PartialToolCall call;
    const size_t end = ScanCallObject(text, i, call);
    calls.push_back(std::move(call));
    return end;
  };
  auto array_at = [&](size_t i) -> size_t {
    i = SkipSpace(text, i);
    if (i >= text.size()) return npos;
    if (text[i] != '[') return i;
    return ScanCallArray(text, i, calls);
  };
  switch (format) {
    case ToolCallFormat::kHermes:
      ScanEach(text, "<tool_call>", object_at);
      break;
    case ToolCallFormat::kLlama3Json: {
      const size_t first = SkipSpace(text, 0);
      if (first < text.size() && text[first] == '{') {
        object_at(first);
        break;
      }
      const size_t tag = text.find("<|python_tag|>");
      if (tag == npos) break;
      const size_t body = SkipSpace(text, tag + 14);
      if (body < text.size() && text[body] == '{') {
        object_at(body);
      } else if (const size_t dot = text.find(".call(", body); dot != npos) {
        calls.push_back({std::string(Trim(text.substr(body, dot - body))), true, ""});
      }
      break;
    }
    case ToolCallFormat::kMistral:
      if (const size_t at = text.find("[TOOL_CALLS]"); at != npos) array_at(at + 12);
      break;
    case ToolCallFormat::kFirefunction:
      if (const size_t at = text.find("functools"); at != npos) array_at(at + 9);
      break;
    case ToolCallFormat::kCommandR7B:
      ScanEach(text, "<|START_ACTION|>", array_at);
      break;
    case ToolCallFormat::kFunctionaryV31:
      ScanEach(text, "<function=", [&](size_t name_start) -> size_t {
        const size_t gt = text.find('>', name_start);
        if (gt == npos) return npos;
        PartialToolCall call{std::string(text.substr(name_start, gt - name_start)), true, ""};
        bool started = false;
        const size_t end = ScanArguments(text, gt + 1, call, &started);
        if (!started) return SkipSpace(text, gt + 1) < text.size() ? gt + 1 : npos;
        calls.push_back(std::move(call));
        return end;
      });
      break;
    case ToolCallFormat::kFunctionaryV32: {
      // Segments "name\n{...}" after ">>>" (the first one's ">>>" ended the prompt).
      size_t pos = text.starts_with(">>>") ? 3 : 0;
      while (pos <= text.size()) {
        const size_t newline = text.find('\n', pos);
        if (newline == npos) break;
        const std::string_view name = Trim(text.substr(pos, newline - pos));
        size_t next = text.find(">>>", newline);
        if (name != "all" && !name.empty()) {
          PartialToolCall call{std::string(name), true, ""};
          bool started = false;
          const size_t end = ScanArguments(text, newline + 1, call, &started);
          if (started) {
            calls.push_back(std::move(call));
            if (end == npos) break;
            next = text.find(">>>", end);
          }
        }
        if (next == npos) break;
        pos = next + 3;
      }
      break;
    }
    case ToolCallFormat::kDeepSeekR1: {
      const std::string_view kBegin = "<｜tool▁calls▁begin｜>";
      const std::string_view kSep = "<｜tool▁sep｜>";
      const size_t begin = text.find(kBegin);
      if (begin == npos) break;
      // (The calls begin marker is its own text, so the call markers come after it.)
      ScanEach(text, "<｜tool▁call▁begin｜>", [&](size_t after) -> size_t {
        if (after < begin) return after;
        const size_t sep = text.find(kSep, after);
        if (sep == npos) return npos;
        const size_t newline = text.find('\n', sep + kSep.size());
        if (newline == npos) return npos;
        PartialToolCall call{std::string(Trim(text.substr(sep + kSep.size(), newline - sep - kSep.size()))),
                             true, ""};
        if (call.name.empty()) return newline;
        size_t i = SkipSpace(text, newline + 1);
        const std::string_view rest = text.substr(std::min(i, text.size()));
        const std::string_view kFence = "```json";
        if (rest.starts_with(kFence)) {
          i += kFence.size();
        } else if (kFence.starts_with(rest)) {  // the fence may still be coming
          return npos;
        } else if (rest.starts_with("```")) {
          i += 3;
        }
        bool started = false;
        const size_t end = ScanArguments(text, i, call, &started);
        if (!started) return SkipSpace(text, i) < text.size() ? i : npos;
        calls.push_back(std::move(call));
        return end;
      });
      break;
    }
  }
  return calls;
}

ToolCallStreamFilter::ToolCallStreamFilter(ToolCallFormat format, const ToolCallFrame* forced)
    : format_(format), forced_(forced != nullptr) {
  if (forced_) {
    frame_ = *forced;
    all_ = frame_.open;
    emitted_ = all_.size();
    in_call_ = true;
  }
}

void ToolCallStreamFilter::StreamCalls(std::vector<ToolCallDelta>* deltas) {
  const std::vector<PartialToolCall> calls = ScanPartialToolCalls(all_, format_);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].has_name) break;  // announced in order
    if (i == sent_.size()) {
      deltas->push_back({i, true, calls[i].name, calls[i].arguments});
      sent_.push_back(calls[i]);
      continue;
    }
    std::string& sent = sent_[i].arguments;
    if (calls[i].arguments.size() > sent.size() && calls[i].arguments.starts_with(sent)) {
      deltas->push_back({i, false, "", calls[i].arguments.substr(sent.size())});
      sent = calls[i].arguments;
    }
  }
}

std::string ToolCallStreamFilter::Push(std::string_view text, std::vector<ToolCallDelta>* deltas) {
  all_ += text;
  if (in_call_) {
    StreamCalls(deltas);
    return {};
  }
  const std::vector<std::string_view> markers = StartMarkers(format_);
  if (markers.empty()) {  // formats whose content is only known at the end
    in_call_ = true;
    StreamCalls(deltas);
    return {};
  }
  if (format_ == ToolCallFormat::kLlama3Json) {  // a bare JSON call starts the output
    const std::string_view t = Trim(all_);
    if (t.empty()) return {};
    if (t.front() == '{') {
      in_call_ = true;
      StreamCalls(deltas);
      return {};
    }
  }
  size_t safe = all_.size();
  for (std::string_view open : markers) {
    const size_t found = all_.find(open, emitted_);
    if (found != std::string::npos) {
      in_call_ = true;
      safe = std::min(safe, found);
      continue;
    }
    // Hold a tail that could be the start of the marker.
    for (size_t keep = std::min(open.size() - 1, all_.size() - emitted_); keep > 0; --keep) {
      if (open.starts_with(std::string_view(all_).substr(all_.size() - keep))) {
        safe = std::min(safe, all_.size() - keep);
        break;
      }
    }
  }
  std::string out = all_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  if (in_call_) StreamCalls(deltas);
  return out;
}

ParsedToolOutput ToolCallStreamFilter::Finish(std::string* held_content,
                                              std::vector<ToolCallDelta>* deltas) {
  ParsedToolOutput parsed =
      forced_ ? ParseToolCalls(std::string_view(all_).substr(frame_.open.size()), format_, &frame_)
              : ParseToolCalls(all_, format_, nullptr);
  held_content->clear();
  const size_t start = forced_ ? frame_.open.size() : 0;
  if (emitted_ == start) {
    *held_content = parsed.content;  // all of it was held: the parse's content
  } else if (parsed.calls.empty()) {
    *held_content = all_.substr(emitted_);  // the held tail (e.g. "<to") was text after all
  } else {
    // Content was streamed before the first call: send the parse's content after it
    // (text between and after the calls), so that the client has the whole content.
    const std::string_view streamed = std::string_view(all_).substr(start, emitted_ - start);
    const std::string_view kept = Trim(streamed);
    if (!kept.empty() && parsed.content.starts_with(kept)) {
      std::string_view rest = std::string_view(parsed.content).substr(kept.size());
      const std::string_view trailing = streamed.substr(streamed.find(kept) + kept.size());
      if (rest.starts_with(trailing)) rest.remove_prefix(trailing.size());
      *held_content = std::string(rest);
    }
  }
  // What the stream has not carried yet. A streamed call the final parse disagrees with
  // (only for malformed text) gets nothing more.
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    const ToolCallOut& call = parsed.calls[i];
    if (i >= sent_.size()) {
      deltas->push_back({i, true, call.name, call.arguments});
      sent_.push_back({call.name, true, call.arguments});
    } else if (sent_[i].name == call.name && call.arguments.starts_with(sent_[i].arguments) &&
               call.arguments.size() > sent_[i].arguments.size()) {
      deltas->push_back({i, false, "", call.arguments.substr(sent_[i].arguments.size())});
      sent_[i].arguments = call.arguments;
    }
  }
  return parsed;
}

}  // namespace sinew::model
