// sinew replay | fork | export | import
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "context.h"

namespace sinew::cli {
namespace json = boost::json;

namespace {

// Waits for the user between events; returns false to stop. Without a usable stdin
// the replay simply runs on.
bool StepPrompt(bool* stepping) {
  if (!*stepping) return true;
  if (isatty(STDIN_FILENO)) std::cerr << "[enter] next  [c] continue  [q] quit > " << std::flush;
  std::string line;
  if (!std::getline(std::cin, line)) {
    *stepping = false;
    return true;
  }
  if (line == "q") return false;
  if (line == "c") *stepping = false;
  return true;
}

struct ReplayTotals {
  uint64_t turns = 0, tokens_in = 0, tokens_out = 0, tool_calls = 0;
};

// `text` with `prefix` before each of its lines.
std::string Indented(const std::string& text, const std::string& prefix) {
  if (prefix.empty()) return text;
  std::string out = prefix;
  for (char ch : text) {
    out.push_back(ch);
    if (ch == '\n') out += prefix;
  }
  return out;
}

// Renders events `from`..`to` of session `id`; with `children`, each delegate call's
// sub-agent (docs/harness.md, "Sub-agents") is rendered after its call, indented, and so
// on down. False when the user quit or a read failed (reported through ctx).
bool ReplayEvents(Context& ctx, ApiClient& api, const std::string& id, uint64_t from, uint64_t to, int64_t t0,
                  bool children, const std::string& prefix, bool* stepping, ReplayTotals* totals) {
  auto events = api.AllEvents(id, from, to);
  if (!events.ok()) {
    ctx.Fail(events.status());
    return false;
  }
  for (const auto& [ev, text] : *events) {
    std::cout << Indented(RenderEvent(ev, t0, ctx.Render()), prefix) << std::endl;
    if (ev.has_model_response()) {
      ++totals->turns;
      totals->tokens_in += ev.model_response().usage().prompt_tokens();
      totals->tokens_out += ev.model_response().usage().completion_tokens();
    }
    if (ev.has_tool_call()) ++totals->tool_calls;
    if (!StepPrompt(stepping)) return false;
    if (children && ev.has_tool_call() && !ev.tool_call().child_session_id().empty()) {
      const std::string& child = ev.tool_call().child_session_id();
      std::cout << prefix << "  sub-agent " << child << ":" << std::endl;
      if (!ReplayEvents(ctx, api, child, 1, 0, t0, children, prefix + "  | ", stepping, totals)) return false;
    }
  }
  return true;
}

}  // namespace

void AddHistoryCommands(CLI::App& app, Context& ctx) {
  struct ReplayArgs {
    std::string id;
    uint64_t from = 1, to = 0;
    bool step = false;
    bool children = false;
  };
  auto r = std::make_shared<ReplayArgs>();
  auto* replay = app.add_subcommand("replay", "render a session as a readable timeline");
  replay->add_option("id", r->id, "session id")->required();
  replay->add_option("--from", r->from, "first event (default 1)");
  replay->add_option("--to", r->to, "last event (default: the end)");
  replay->add_flag("--step", r->step, "one event at a time: enter = next, c = continue, q = quit");
  replay->add_flag("--follow-children", r->children,
                   "render each sub-agent's events after the delegate call that started it, indented");
  replay->callback([&ctx, r] {
    ctx.Resolve();
    ApiClient api = ctx.Api();
    auto session = api.GetSession(r->id);
    if (!session.ok()) return ctx.Fail(session.status());
    if (ctx.json) {
      auto events = api.AllEvents(r->id, r->from, r->to);
      if (!events.ok()) return ctx.Fail(events.status());
      for (const auto& [ev, text] : *events) std::cout << text << "\n";
      return;
    }
    std::cout << "session " << session->id << "  \"" << session->title << "\"  ("
              << session->status << ", " << (session->next_seq - 1) << " events, created "
              << FormatTime(session->created_unix_ms) << " UTC)\n";
    bool stepping = r->step;
    ReplayTotals totals;
    if (!ReplayEvents(ctx, api, r->id, r->from, r->to, session->created_unix_ms, r->children, "", &stepping,
                      &totals)) {
      return;
    }
    std::cout << "-- " << totals.turns << " model turns, " << totals.tool_calls << " tool calls, "
              << totals.tokens_in << " tokens in, " << totals.tokens_out << " tokens out\n";
  });

  struct ForkArgs {
    std::string id, model, message;
    uint64_t at = 0;
    uint32_t n = 1;
    bool follow = false;
  };
  auto f = std::make_shared<ForkArgs>();
  auto* fork = app.add_subcommand("fork", "new sessions from events 1..N of another, continued (with its sandbox "
                                          "as it was then, when the source kept a snapshot)");
  fork->add_option("id", f->id, "session to fork")->required();
  fork->add_option("--at", f->at, "last event to keep")->required()->check(CLI::PositiveNumber);
  fork->add_option("-n,--n", f->n, "forks to start from that point (best-of-n), 1-16")->check(CLI::Range(1, 16));
  fork->add_option("--model", f->model, "continue with another model");
  fork->add_option("--message", f->message, "continue with this user message");
  fork->add_flag("--follow", f->follow, "follow the new session until it ends (with -n 1)");
  fork->callback([&ctx, f] {
    ctx.Resolve();
    json::object body{{"at_seq", f->at}};
    if (f->n != 1) body["n"] = f->n;
    if (!f->model.empty()) body["model"] = f->model;
    if (!f->message.empty()) body["message"] = f->message;
    auto forked = ctx.Api().Fork(f->id, body);
    if (!forked.ok()) return ctx.Fail(forked.status());
    if (ctx.json) {
      std::cout << json::serialize(forked->raw) << "\n";
    } else {
      for (const auto& s : forked->sessions) std::cout << s.id << "\n";
      std::string sandbox = "";
      if (forked->sandbox.is_object()) {
        const auto& sb = forked->sandbox.as_object();
        const json::value* snap = sb.if_contains("from_snapshot");
        sandbox = snap != nullptr && snap->is_string()
                      ? "; sandbox from snapshot " + std::string(snap->as_string()) + " (at #" +
                            json::serialize(sb.at("snapshot_at_seq")) + ", " +
                            json::serialize(sb.at("calls_after_snapshot")) + " sandbox calls after it)"
                      : "; no snapshot of its sandbox was kept by then: a fresh sandbox";
      }
      std::cerr << "forked " << f->id << " at #" << f->at << " into " << forked->sessions.size() << " session"
                << (forked->sessions.size() == 1 ? "" : "s") << sandbox << "\n";
    }
    if (f->follow && forked->sessions.size() == 1) ctx.exit_code = FollowSession(ctx, forked->sessions[0].id, f->at);
  });

  struct ExportArgs {
    std::string id, out;
  };
  auto e = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand("export", "print a session as JSON lines, one event each");
  exp->add_option("id", e->id, "session id")->required();
  exp->add_option("-o,--out", e->out, "write to this file instead of stdout");
  exp->callback([&ctx, e] {
    ctx.Resolve();
    auto events = ctx.Api().Export(e->id);
    if (!events.ok()) return ctx.Fail(events.status());
    std::ofstream file;
    if (!e->out.empty()) {
      file.open(e->out, std::ios::binary | std::ios::trunc);
      if (!file) return ctx.Fail(Status::IOError("cannot write " + e->out));
    }
    std::ostream& os = e->out.empty() ? std::cout : file;
    for (const auto& [ev, text] : *events) os << text << "\n";
    os.flush();
    if (!e->out.empty()) {
      std::cerr << "exported " << events->size() << " events to " << e->out << "\n";
    }
  });

  auto in = std::make_shared<std::string>();
  auto* imp = app.add_subcommand("import", "recreate a session from `sinew export` output");
  imp->add_option("file", *in, "JSON lines file, or - for stdin")->required();
  imp->callback([&ctx, in] {
    ctx.Resolve();
    std::stringstream buf;
    if (*in == "-") {
      buf << std::cin.rdbuf();
    } else {
      std::ifstream file(*in, std::ios::binary);
      if (!file) return ctx.Fail(Status::NotFound("cannot read " + *in));
      buf << file.rdbuf();
    }
    // Check every line locally first, so a bad file is named line by line.
    std::istringstream lines(buf.str());
    size_t n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      if (line.empty()) continue;
      auto ev = ParseEvent(line);
      if (!ev.ok()) {
        return ctx.Fail(Status::InvalidArgument(*in + " line " + std::to_string(n) + ": " +
                                                ev.status().message()));
      }
    }
    auto s = ctx.Api().Import(buf.str());
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << s->id << "\n";
    }
  });
}

}  // namespace sinew::cli
