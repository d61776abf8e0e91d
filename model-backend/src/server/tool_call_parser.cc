#include "tool_call_parser.h"

#include <boost/json.hpp>

#include "tool_call_json.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using tool_json::Trim;
using tool_json::CompactJson;
using tool_json::ParseCall;
using tool_json::ParseCallArray;
using tool_json::SkipSpace;
using tool_json::ScanCallArray;

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

}  // namespace

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

}  // namespace sinew::model
