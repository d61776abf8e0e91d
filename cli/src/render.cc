#include "render.h"

#include <cstdio>
#include <ctime>
#include <sstream>

#include "sinew/session_store/session_store.h"

namespace sinew::cli {
namespace {

const char* kReset = "\033[0m";
const char* kDim = "\033[2m";
const char* kCyan = "\033[36m";
const char* kYellow = "\033[33m";
const char* kRed = "\033[31m";
const char* kGreen = "\033[32m";
const char* kMagenta = "\033[35m";

std::string Paint(const std::string& s, const char* code, bool color) {
  return color ? std::string(code) + s + kReset : s;
}

std::string OneLine(const std::string& s, size_t max) {
  std::string out;
  for (char c : s) out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

std::string Seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

// Indented body lines, folded to opts.fold_lines unless opts.full.
std::string Body(const std::string& text, const RenderOptions& opts) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  size_t shown = opts.full ? lines.size() : std::min(lines.size(), opts.fold_lines);
  std::string out;
  for (size_t i = 0; i < shown; ++i) out += "\n" + std::string(26, ' ') + "| " + lines[i];
  if (shown < lines.size()) {
    out += "\n" + std::string(26, ' ') +
           Paint("... " + std::to_string(lines.size() - shown) + " more lines (--full shows all)",
                 kDim, opts.color);
  }
  return out;
}

std::string Describe(const v1::Event& ev, const RenderOptions& o) {
  const bool c = o.color;
  switch (ev.payload_case()) {
    case v1::Event::kSessionCreated: {
      const auto& s = ev.session_created();
      std::string d = Paint("session created", kMagenta, c) + "  tenant=" + s.tenant() +
                      " title=\"" + OneLine(s.title(), 60) + "\"";
      if (!s.forked_from_session().empty()) {
        d += " forked from " + s.forked_from_session() + " at #" + std::to_string(s.forked_at_seq());
      }
      if (!s.parent_session_id().empty()) {
        d += " sub-agent of " + s.parent_session_id() + " (call " + s.parent_call_id() + ")";
      }
      return d;
    }
    case v1::Event::kUserMessage:
      return Paint("user", kGreen, c) + "             " +
             (o.full ? ev.user_message().text() : OneLine(ev.user_message().text(), 100));
    case v1::Event::kModelRequest:
      return Paint("model ->", kCyan, c) + "         turn " +
             std::to_string(ev.model_request().turn()) + ", " + ev.model_request().model() +
             ", " + std::to_string(ev.model_request().prompt_messages()) + " messages";
    case v1::Event::kModelResponse: {
      const auto& r = ev.model_response();
      std::string d = Paint("model <-", kCyan, c) + "         ";
      if (!r.text().empty()) d += "\"" + OneLine(r.text(), o.full ? 100000 : 80) + "\" ";
      for (const auto& t : r.tool_calls()) d += "=> " + t.name() + "(" + t.call_id() + ") ";
      if (!r.reasoning().empty()) d += Paint("(reasoning: " + std::to_string(r.reasoning().size()) + " bytes) ", kDim, c);
      d += Paint("[" + r.stop_reason() + ", " + std::to_string(r.usage().prompt_tokens()) +
                     " in / " + std::to_string(r.usage().completion_tokens()) + " out, " +
                     Seconds(r.latency_ms()) + "]",
                 kDim, c);
      return d;
    }
    case v1::Event::kToolCall: {
      const auto& t = ev.tool_call();
      return Paint("tool -> " + t.tool_name(), kYellow, c) +
             std::string(t.tool_name().size() < 9 ? 9 - t.tool_name().size() : 1, ' ') +
             t.call_id() + "  " + OneLine(t.input_json(), o.full ? 100000 : 80) +
             (t.idempotent() ? Paint(" (idempotent)", kDim, c) : "") +
             (t.child_session_id().empty() ? "" : Paint(" -> sub-agent " + t.child_session_id(), kMagenta, c));
    }
    case v1::Event::kToolResult: {
      const auto& r = ev.tool_result();
      std::string state = r.interrupted() ? Paint("interrupted", kRed, c)
                          : r.is_error()  ? Paint("error", kRed, c)
                                          : "ok";
      std::string d = Paint("tool <-", kYellow, c) + "          " + r.call_id() + "  " + state +
                      ", exit " + std::to_string(r.exit_status()) + ", " +
                      Seconds(r.duration_ms()) + (r.timed_out() ? ", timed out" : "") +
                      (r.truncated() ? ", truncated" : "") +
                      (r.child_session_id().empty() ? ""
                                                    : ", sub-agent " + r.child_session_id() + " (" +
                                                          std::to_string(r.child_output_tokens()) + " tokens out)");
      return d + Body(r.output(), o);
    }
    case v1::Event::kSandboxProvisioned: {
      const auto& s = ev.sandbox_provisioned();
      return Paint("sandbox up", kMagenta, c) + "       " + s.sandbox_id() + " in " +
             Seconds(s.provision_ms()) + (s.from_warm_pool() ? " (warm pool)" : "") +
             (s.from_snapshot().empty() ? "" : " from " + s.from_snapshot());
    }
    case v1::Event::kSandboxReleased:
      return Paint("sandbox down", kMagenta, c) + "     " + ev.sandbox_released().sandbox_id() +
             " (" + ev.sandbox_released().reason() + ")";
    case v1::Event::kSandboxPaused: {
      const auto& s = ev.sandbox_paused();
      return Paint("sandbox paused", kMagenta, c) + "   " + s.sandbox_id() + " (" + s.reason() + ", after " +
             Seconds(s.idle_ms()) + " idle) in " + Seconds(s.pause_ms());
    }
    case v1::Event::kSandboxSnapshot: {
      const auto& s = ev.sandbox_snapshot();
      return Paint("sandbox snapshot", kMagenta, c) + " " + s.sandbox_id() + " as " + s.snapshot_id() + " (" +
             s.reason() + ", at seq " + std::to_string(s.at_seq()) + ", " + std::to_string(s.added_bytes()) +
             " bytes added) in " + Seconds(s.duration_ms());
    }
    case v1::Event::kSandboxResumed:
      return Paint("sandbox resumed", kMagenta, c) + "  " + ev.sandbox_resumed().sandbox_id() + " in " +
             Seconds(ev.sandbox_resumed().resume_ms());
    case v1::Event::kSandboxLost:
      return Paint("sandbox lost", kRed, c) + "     " + ev.sandbox_lost().sandbox_id() + ": " +
             ev.sandbox_lost().outcome() + " " + OneLine(ev.sandbox_lost().detail(), 80);
    case v1::Event::kStatusChange: {
      const auto& s = ev.status_change();
      const char* code = s.to() == v1::SESSION_STATUS_COMPLETED ? kGreen
                         : s.to() == v1::SESSION_STATUS_FAILED  ? kRed
                                                                : kMagenta;
      return Paint("status", code, c) + "           " + store::SessionStatusName(s.from()) +
             " -> " + store::SessionStatusName(s.to()) +
             (s.reason().empty() ? "" : " (" + OneLine(s.reason(), 80) + ")");
    }
    case v1::Event::kError: {
      // The message is shown whole (it holds a model server's own words, up to 2 KB).
      const auto& e = ev.error();
      return Paint("error", kRed, c) + "            " + e.code() +
             (e.http_status() != 0 ? " [HTTP " + std::to_string(e.http_status()) + "]" : "") +
             (e.retryable() ? " (retryable)" : "") + Body(e.message(), o);
    }
    case v1::Event::kAnnotation:
      return Paint("note", kDim, c) + "             " + ev.annotation().author() + ": " +
             OneLine(ev.annotation().text(), 100);
    case v1::Event::kAudit: {
      const auto& a = ev.audit();
      return Paint("audit", kDim, c) + "            " + a.action() + " by " + a.tenant() + " (key " + a.key_id() +
             (a.remote_address().empty() ? "" : ", from " + a.remote_address()) + ")" +
             (a.detail().empty() ? "" : ": " + OneLine(a.detail(), 100));
    }
    case v1::Event::kApprovalRequested: {
      const auto& a = ev.approval_requested();
      return Paint("approval?", kYellow, c) + "        " + a.call_id() + " " + a.tool_name() + " " +
             OneLine(a.input_json(), 80) + " (" + a.reason() + "; sinew approve|deny SESSION " + a.call_id() + ")";
    }
    case v1::Event::kApprovalDecided: {
      const auto& a = ev.approval_decided();
      return Paint(a.approved() ? "approved" : "denied", a.approved() ? kGreen : kRed, c) +
             std::string(a.approved() ? "         " : "           ") + a.call_id() + " by " + a.by() +
             (a.message().empty() ? "" : ": " + OneLine(a.message(), 100));
    }
    case v1::Event::kInterrupt:
      return Paint("interrupt", kYellow, c) + "        by key " + ev.interrupt().key_id() + ": " +
             OneLine(ev.interrupt().message(), 100);
    default:
      return Paint(ev.type().empty() ? "unknown event" : ev.type(), kDim, c) +
             "  (a newer event type; `sinew export` keeps it whole)";
  }
}

}  // namespace

std::string FormatTime(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string RenderEvent(const v1::Event& ev, int64_t t0_ms, const RenderOptions& opts) {
  char head[48];
  std::snprintf(head, sizeof head, "#%-5llu %10s  ", static_cast<unsigned long long>(ev.seq()),
                ("+" + Seconds(ev.timestamp_unix_ms() - t0_ms)).c_str());
  return Paint(head, kDim, opts.color) + Describe(ev, opts);
}

std::string RenderSessionTable(const std::vector<SessionRow>& rows, bool color) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-32s  %-17s  %-19s  %6s  %s\n", "ID", "STATUS",
                "UPDATED (UTC)", "EVENTS", "TITLE");
  out += Paint(line, kDim, color);
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-32s  %-17s  %-19s  %6llu  %s\n", r.id.c_str(),
                  r.status.c_str(), FormatTime(r.updated_unix_ms).c_str(),
                  static_cast<unsigned long long>(r.events), OneLine(r.title, 60).c_str());
    out += line;
  }
  return out;
}

bool IsTerminalStatus(v1::SessionStatus status) {
  return status == v1::SESSION_STATUS_COMPLETED || status == v1::SESSION_STATUS_FAILED ||
         status == v1::SESSION_STATUS_CANCELLED;
}

}  // namespace sinew::cli
