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

}  // namespace

void AddHistoryCommands(CLI::App& app, Context& ctx) {
  struct ReplayArgs {
    std::string id;
    uint64_t from = 1, to = 0;
    bool step = false;
  };
  auto r = std::make_shared<ReplayArgs>();
  auto* replay = app.add_subcommand("replay", "render a session as a readable timeline");
  replay->add_option("id", r->id, "session id")->required();
  replay->add_option("--from", r->from, "first event (default 1)");
  replay->add_option("--to", r->to, "last event (default: the end)");
  replay->add_flag("--step", r->step, "one event at a time: enter = next, c = continue, q = quit");
  replay->callback([&ctx, r] {
    ctx.Resolve();
    ApiClient api = ctx.Api();
    auto session = api.GetSession(r->id);
    if (!session.ok()) return ctx.Fail(session.status());
    auto events = api.AllEvents(r->id, r->from, r->to);
    if (!events.ok()) return ctx.Fail(events.status());
    if (ctx.json) {
      for (const auto& [ev, text] : *events) std::cout << text << "\n";
      return;
    }
    std::cout << "session " << session->id << "  \"" << session->title << "\"  ("
              << session->status << ", " << (session->next_seq - 1) << " events, created "
              << FormatTime(session->created_unix_ms) << " UTC)\n";
    int64_t t0 = session->created_unix_ms;
    uint64_t turns = 0, tokens_in = 0, tokens_out = 0, tool_calls = 0;
    bool stepping = r->step;
    for (const auto& [ev, text] : *events) {
      std::cout << RenderEvent(ev, t0, ctx.Render()) << std::endl;
      if (ev.has_model_response()) {
        ++turns;
        tokens_in += ev.model_response().usage().prompt_tokens();
        tokens_out += ev.model_response().usage().completion_tokens();
      }
      if (ev.has_tool_call()) ++tool_calls;
      if (!StepPrompt(&stepping)) return;
    }
    std::cout << "-- " << turns << " model turns, " << tool_calls << " tool calls, "
              << tokens_in << " tokens in, " << tokens_out << " tokens out\n";
  });

  struct ForkArgs {
    std::string id, model, message;
    uint64_t at = 0;
    bool follow = false;
  };
  auto f = std::make_shared<ForkArgs>();
  auto* fork = app.add_subcommand("fork", "new session from events 1..N of another, continued");
  fork->add_option("id", f->id, "session to fork")->required();
  fork->add_option("--at", f->at, "last event to keep")->required()->check(CLI::PositiveNumber);
  fork->add_option("--model", f->model, "continue with another model");
  fork->add_option("--message", f->message, "continue with this user message");
  fork->add_flag("--follow", f->follow, "follow the new session until it ends");
  fork->callback([&ctx, f] {
    ctx.Resolve();
    json::object body{{"at_seq", f->at}};
    if (!f->model.empty()) body["model"] = f->model;
    if (!f->message.empty()) body["message"] = f->message;
    auto s = ctx.Api().Fork(f->id, body);
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << s->id << "\n";
      std::cerr << "forked " << f->id << " at #" << f->at << " into " << s->id << "\n";
    }
    if (f->follow) ctx.exit_code = FollowSession(ctx, s->id, f->at);
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
