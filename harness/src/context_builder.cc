#include "context_builder.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace sinew::harness {
namespace {

constexpr const char* kInterruptedNote =
    "[interrupted: the harness restarted while this tool call ran; it may or may not have "
    "taken effect. Check before repeating it.]";

std::string Clip(const std::string& text, size_t n) {
  if (text.size() <= n) return text;
  return text.substr(0, n) + "...";
}

// The cut of a summary annotation (written below: kind=summary, through_seq=N). Other
// annotations, and summaries without a decimal through_seq (a log may be imported from
// anywhere; event_lines_fuzz found one that aborted the harness), are not summaries.
std::optional<uint64_t> SummaryCut(const v1::Event& ev) {
  if (!ev.has_annotation()) return std::nullopt;
  const auto& labels = ev.annotation().labels();
  auto kind = labels.find("kind");
  auto through = labels.find("through_seq");
  if (kind == labels.end() || kind->second != "summary" || through == labels.end()) return std::nullopt;
  const std::string& text = through->second;
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return seq;
}

// The chat message of one event, if it has one.
std::optional<ChatMessage> MessageOf(const v1::Event& ev) {
  ChatMessage m;
  switch (ev.payload_case()) {
    case v1::Event::kUserMessage:
      m.role = ChatMessage::Role::kUser;
      m.text = ev.user_message().text();
      return m;
    case v1::Event::kModelResponse:
      // An answer an interrupt cut before any of it streamed says nothing.
      if (ev.model_response().partial() && ev.model_response().text().empty()) return std::nullopt;
      m.role = ChatMessage::Role::kAssistant;
      m.text = ev.model_response().text();
      m.reasoning = ev.model_response().reasoning();
      for (const auto& tc : ev.model_response().tool_calls()) {
        m.tool_calls.push_back({tc.call_id(), tc.name(), tc.input_json()});
      }
      return m;
    case v1::Event::kToolResult:
      m.role = ChatMessage::Role::kTool;
      m.tool_call_id = ev.tool_result().call_id();
      m.text = ev.tool_result().interrupted() ? std::string(kInterruptedNote) : ev.tool_result().output();
      m.is_error = ev.tool_result().is_error() || ev.tool_result().interrupted();
      return m;
    default:
      return std::nullopt;
  }
}

std::string DigestOf(const v1::Event& ev) {
  switch (ev.payload_case()) {
    case v1::Event::kUserMessage:
      return "- user: " + Clip(ev.user_message().text(), 300) + "\n";
    case v1::Event::kModelResponse: {
      std::string s = "- assistant: " + Clip(ev.model_response().text(), 300);
      for (const auto& tc : ev.model_response().tool_calls()) {
        s += " [called " + tc.name() + " " + Clip(tc.input_json(), 150) + "]";
      }
      return s + "\n";
    }
    case v1::Event::kToolResult:
      return "- result of " + ev.tool_result().call_id() + (ev.tool_result().is_error() ? " (error)" : "") +
             ": " + Clip(ev.tool_result().output(), 200) + "\n";
    default:
      return "";
  }
}

}  // namespace

uint64_t EstimateTokens(const ChatMessage& m) {
  uint64_t bytes = m.text.size() + 16;
  for (const auto& tc : m.tool_calls) bytes += tc.name.size() + tc.input_json.size() + 16;
  return bytes / 4 + 1;
}

ContextView BuildContext(const std::vector<v1::Event>& events, uint64_t budget) {
  ContextView view;
  // The task: the first user message; the current summary, if any.
  int task_index = -1;
  int summary_index = -1;
  uint64_t cut_seq = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& ev = events[i];
    if (task_index < 0 && ev.has_user_message()) task_index = static_cast<int>(i);
    if (auto cut = SummaryCut(ev)) {
      summary_index = static_cast<int>(i);
      cut_seq = *cut;
    }
  }
  // Candidate tail: messages of events after the cut (all of them without a summary).
  struct Item {
    size_t index;
    ChatMessage message;
  };
  std::vector<Item> tail;
  for (size_t i = 0; i < events.size(); ++i) {
    if (static_cast<int>(i) == task_index) continue;
    if (events[i].seq() <= cut_seq) continue;
    if (auto m = MessageOf(events[i])) tail.push_back({i, std::move(*m)});
  }
  ChatMessage task;
  if (task_index >= 0) task = *MessageOf(events[task_index]);
  std::string summary_text = summary_index >= 0 ? events[summary_index].annotation().text() : "";

  auto total = [&](const std::vector<Item>& items, const std::string& summary) {
    uint64_t t = EstimateTokens(task) + (summary.empty() ? 0 : summary.size() / 4 + 8);
    for (const auto& it : items) t += EstimateTokens(it.message);
    return t;
  };

  if (total(tail, summary_text) > budget && tail.size() > 1) {
    // Move the window: keep the newest turns that fit in half the budget, starting at a
    // user or assistant message (a tool result never loses its call).
    uint64_t keep_tokens = 0;
    size_t start = tail.size();
    while (start > 0) {
      const uint64_t t = EstimateTokens(tail[start - 1].message);
      if (keep_tokens + t > budget / 2 && start < tail.size()) break;
      keep_tokens += t;
      --start;
    }
    while (start < tail.size() && tail[start].message.role == ChatMessage::Role::kTool) ++start;
    if (start == tail.size() && !tail.empty()) {
      // Even the last turn alone is too big: keep the last assistant turn anyway.
      start = tail.size() - 1;
      while (start > 0 && tail[start].message.role == ChatMessage::Role::kTool) --start;
    }
    if (start > 0) {
      const uint64_t new_cut = events[tail[start].index].seq() - 1;
      std::string digest;
      for (size_t i = 0; i < events.size(); ++i) {
        if (static_cast<int>(i) == task_index) continue;
        if (events[i].seq() > cut_seq && events[i].seq() <= new_cut) digest += DigestOf(events[i]);
      }
      summary_text += digest;
      const size_t max_summary = static_cast<size_t>(budget) * 4 / 4;  // a quarter of the budget, in bytes
      if (summary_text.size() > max_summary) {
        summary_text = "(earlier history omitted)\n" + summary_text.substr(summary_text.size() - max_summary);
      }
      v1::Event ev;
      auto* a = ev.mutable_annotation();
      a->set_author("harness");
      a->set_text(summary_text);
      (*a->mutable_labels())["kind"] = "summary";
      (*a->mutable_labels())["through_seq"] = std::to_string(new_cut);
      view.new_summary = std::move(ev);
      tail.erase(tail.begin(), tail.begin() + static_cast<long>(start));
    }
  }
  if (task_index >= 0) view.messages.push_back(task);
  if (!summary_text.empty()) {
    ChatMessage s;
    s.role = ChatMessage::Role::kUser;
    s.text = "Summary of the earlier part of this session (the full log is kept):\n" + summary_text;
    view.messages.push_back(std::move(s));
  }
  for (auto& it : tail) view.messages.push_back(std::move(it.message));
  view.estimated_tokens = 0;
  for (const auto& m : view.messages) view.estimated_tokens += EstimateTokens(m);
  return view;
}

}  // namespace sinew::harness
