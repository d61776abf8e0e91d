#include "tool_call_stream.h"

#include <algorithm>

#include "tool_call_json.h"

namespace sinew::model {
namespace {

using tool_json::Trim;
using tool_json::SkipSpace;
using tool_json::ScanCallObject;
using tool_json::ScanCallArray;
using tool_json::ScanArguments;

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
