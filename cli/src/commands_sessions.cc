// sinew run | tail | sessions list | sessions show | cancel | message
#include <iostream>
#include <thread>

#include "sinew/proto_json.h"
#include "sinew/utf8.h"
#include "context.h"

namespace sinew::cli {
namespace json = boost::json;

namespace {

int ExitCodeFor(const v1::StatusChange& change) {
  switch (change.to()) {
    case v1::SESSION_STATUS_COMPLETED: return kExitOk;
    case v1::SESSION_STATUS_CANCELLED: return kExitCancelled;
    default:
      // The harness ends limit stops with a reason "limit reached: max_turns 10" and so on.
      return change.reason().rfind("limit reached", 0) == 0 ||
                     change.reason().rfind("limit_reached", 0) == 0
                 ? kExitLimit
                 : kExitFailed;
  }
}

SessionRow RowOf(const SessionView& s) {
  return {s.id, s.status, s.title, s.updated_unix_ms, s.next_seq > 0 ? s.next_seq - 1 : 0};
}

void PrintSession(Context& ctx, const SessionView& s) {
  if (ctx.json) {
    std::cout << json::serialize(s.raw) << "\n";
    return;
  }
  std::cout << "id:       " << s.id << "\n"
            << "status:   " << s.status << "\n"
            << "title:    " << s.title << "\n"
            << "tenant:   " << s.tenant << "\n"
            << "created:  " << FormatTime(s.created_unix_ms) << " UTC\n"
            << "updated:  " << FormatTime(s.updated_unix_ms) << " UTC\n"
            << "events:   " << (s.next_seq > 0 ? s.next_seq - 1 : 0) << "\n";
  if (!s.forked_from_session.empty()) {
    std::cout << "forked:   from " << s.forked_from_session << " at #" << s.forked_at_seq << "\n";
  }
  // A session that requires action: the tool calls that wait (sinew approve|deny).
  if (const auto* pending = s.raw.if_contains("pending_approvals"); pending != nullptr && pending->is_array()) {
    for (const auto& p : pending->as_array()) {
      if (!p.is_object()) continue;
      const auto& o = p.as_object();
      auto str = [&](const char* k) {
        const auto* v = o.if_contains(k);
        return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
      };
      std::cout << "waiting:  " << str("call_id") << " " << str("tool_name") << " " << str("input_json") << " ("
                << str("reason") << ")\n";
    }
  }
}

}  // namespace

int FollowSession(Context& ctx, const std::string& id, uint64_t after) {
  ApiClient api = ctx.Api();
  uint64_t last = after;
  int64_t t0 = 0;
  std::optional<v1::StatusChange> final_change;
  int attempts = 0;
  // On a terminal, a status line on stderr shows how long we have waited for the next
  // event; it is cleared before each event is printed.
  const bool progress = ctx.interactive && !ctx.json;
  auto last_event_at = std::chrono::steady_clock::now();
  bool status_shown = false;
  int64_t shown_idle = -1;
  auto clear_status = [&] {
    if (status_shown) std::cerr << "\r\033[K" << std::flush;
    status_shown = false;
    shown_idle = -1;
  };
  auto tick = [&] {
    if (!progress) return;
    auto idle = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::steady_clock::now() - last_event_at).count();
    if (idle < 2 || idle == shown_idle) return;
    shown_idle = idle;
    std::cerr << "\r\033[K... waiting for the next event (" << idle << " s, after #" << last
              << ")" << std::flush;
    status_shown = true;
  };
  while (true) {
    uint64_t before = last;
    Status st = api.Stream(id, last, [&](const v1::Event& ev) {
      if (ev.seq() <= last) return;  // never print an event twice
      clear_status();
      last_event_at = std::chrono::steady_clock::now();
      last = ev.seq();
      if (t0 == 0) t0 = ev.timestamp_unix_ms();
      if (ctx.json) {
        std::cout << ProtoJsonLine(ev) << std::endl;
      } else {
        std::cout << RenderEvent(ev, t0, ctx.Render()) << std::endl;
      }
      if (ev.has_status_change() && IsTerminalStatus(ev.status_change().to())) {
        final_change = ev.status_change();
      }
    }, tick);
    clear_status();
    if (final_change) return ExitCodeFor(*final_change);
    if (!st.ok() && st.code() != StatusCode::kUnavailable) {
      ctx.Fail(st);
      return kExitError;
    }
    if (last > before) attempts = 0;
    if (++attempts > 30) {
      ctx.Fail(Status::Unavailable("gave up following " + id + " after 30 reconnects: " +
                                   st.message()));
      return kExitError;
    }
    if (ctx.interactive && !ctx.json) {
      std::cerr << "... stream interrupted (" << (st.ok() ? "closed" : st.message())
                << "); reconnecting after #" << last << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200 * attempts, 3000)));
  }
}

void AddSessionCommands(CLI::App& app, Context& ctx) {
  // sinew run
  struct RunArgs {
    std::string task, model, system, title, image, network, approvals;
    std::vector<std::string> tools, meta;
    int64_t cpu = 0, memory = 0, memory_limit = 0, pids = 0, disk = 0;
    int64_t max_turns = 0, max_tokens = 0, max_wall = 0;
    bool detach = false;
    bool keep_open = false;
  };
  auto args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "submit a task and follow it until it ends");
  run->add_option("task", args->task, "what the agent should do")->required();
  run->add_option("--model", args->model, "model name from the harness config");
  run->add_option("--system", args->system, "system prompt");
  run->add_option("--title", args->title, "session title (default: the task)");
  run->add_option("--tools", args->tools, "allowed tools (default: all)")->delimiter(',');
  run->add_option("--cpu", args->cpu, "sandbox CPU in millicores");
  run->add_option("--memory", args->memory, "sandbox guaranteed memory in bytes");
  run->add_option("--memory-limit", args->memory_limit, "sandbox memory kill limit in bytes");
  run->add_option("--pids", args->pids, "sandbox process limit");
  run->add_option("--disk", args->disk, "sandbox workspace size in bytes");
  run->add_option("--image", args->image, "sandbox image");
  run->add_option("--network", args->network, "sandbox network (none by default)");
  run->add_option("--max-turns", args->max_turns, "stop after this many model turns");
  run->add_option("--max-tokens", args->max_tokens, "stop after this many output tokens");
  run->add_option("--max-wall", args->max_wall, "stop after this many seconds");
  run->add_option("--meta", args->meta, "metadata key=value (repeatable)");
  run->add_option("--approvals", args->approvals,
                  "tool approval policy as JSON, e.g. '{\"default\": \"ask\"}' (docs/harness.md)");
  run->add_flag("--detach", args->detach, "print the session id and return at once");
  run->add_flag("--keep-open", args->keep_open,
                "a conversation: the session waits for input after each turn until `sinew close` (with --detach)");
  run->callback([&ctx, args] {
    ctx.Resolve();
    // Followed, it would wait for an end that only a close brings.
    if (args->keep_open && !args->detach) {
      return ctx.Fail(Status::InvalidArgument("--keep-open needs --detach (then: sinew message, sinew close)"));
    }
    json::object body{{"prompt", args->task}};
    body["title"] = args->title.empty() ? std::string(Utf8Prefix(args->task, 80)) : args->title;
    if (!args->model.empty()) body["model"] = args->model;
    if (!args->system.empty()) body["system"] = args->system;
    if (!args->tools.empty()) {
      json::array tools;
      for (const auto& t : args->tools) tools.emplace_back(t);
      body["tools"] = std::move(tools);
    }
    json::object sandbox;
    auto put = [](json::object& o, const char* k, int64_t v) { if (v > 0) o[k] = v; };
    put(sandbox, "cpu_millis", args->cpu);
    put(sandbox, "memory_bytes", args->memory);
    put(sandbox, "memory_limit_bytes", args->memory_limit);
    put(sandbox, "pids", args->pids);
    put(sandbox, "disk_bytes", args->disk);
    if (!args->image.empty()) sandbox["image"] = args->image;
    if (!args->network.empty()) sandbox["network"] = args->network;
    if (!sandbox.empty()) body["sandbox"] = std::move(sandbox);
    json::object limits;
    put(limits, "max_turns", args->max_turns);
    put(limits, "max_output_tokens", args->max_tokens);
    put(limits, "max_wall_seconds", args->max_wall);
    if (!limits.empty()) body["limits"] = std::move(limits);
    json::object meta;
    for (const auto& kv : args->meta) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) {
        ctx.Fail(Status::InvalidArgument("--meta takes key=value, got '" + kv + "'"));
        return;
      }
      meta[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!meta.empty()) body["metadata"] = std::move(meta);
    if (args->keep_open) body["keep_open"] = true;
    if (!args->approvals.empty()) {
      boost::system::error_code ec;
      json::value approvals = json::parse(args->approvals, ec);
      if (ec) return ctx.Fail(Status::InvalidArgument("--approvals must be JSON: " + ec.message()));
      body["approvals"] = std::move(approvals);
    }
    auto session = ctx.Api().Submit(body);
    if (!session.ok()) return ctx.Fail(session.status());
    if (args->detach || ctx.json) {
      if (ctx.json && args->detach) std::cout << json::serialize(session->raw) << "\n";
      if (!ctx.json) std::cout << session->id << "\n";
      if (args->detach) return;
    } else {
      std::cerr << "session " << session->id << " submitted; following its events (Ctrl-C "
                << "stops following, not the session)\n";
    }
    ctx.exit_code = FollowSession(ctx, session->id, 0);
  });

  // sinew tail
  auto tail_id = std::make_shared<std::string>();
  auto tail_after = std::make_shared<uint64_t>(0);
  auto* tail = app.add_subcommand("tail", "follow a session's events live (reconnects)");
  tail->add_option("id", *tail_id, "session id")->required();
  tail->add_option("--after", *tail_after, "start after this event number");
  tail->callback([&ctx, tail_id, tail_after] {
    ctx.Resolve();
    ctx.exit_code = FollowSession(ctx, *tail_id, *tail_after);
  });

  // sinew sessions list | show
  auto* sessions = app.add_subcommand("sessions", "list or show sessions");
  sessions->require_subcommand(1);
  auto status = std::make_shared<std::string>();
  auto limit = std::make_shared<uint32_t>(50);
  auto* list = sessions->add_subcommand("list", "sessions of your tenant, newest first");
  list->add_option("--status", *status, "queued|running|requires_action|waiting_for_input|completed|failed|cancelled");
  list->add_option("--limit", *limit, "how many (default 50)");
  list->callback([&ctx, status, limit] {
    ctx.Resolve();
    std::string next;
    auto page = ctx.Api().ListSessions(*status, *limit, "", &next);
    if (!page.ok()) return ctx.Fail(page.status());
    if (ctx.json) {
      for (const auto& s : *page) std::cout << json::serialize(s.raw) << "\n";
      return;
    }
    std::vector<SessionRow> rows;
    for (const auto& s : *page) rows.push_back(RowOf(s));
    std::cout << RenderSessionTable(rows, ctx.color);
    if (!next.empty()) std::cout << "(more: raise --limit)\n";
  });
  auto show_id = std::make_shared<std::string>();
  auto* show = sessions->add_subcommand("show", "one session's details");
  show->add_option("id", *show_id, "session id")->required();
  show->callback([&ctx, show_id] {
    ctx.Resolve();
    auto s = ctx.Api().GetSession(*show_id);
    if (!s.ok()) return ctx.Fail(s.status());
    PrintSession(ctx, *s);
  });

  // sinew cancel | message
  auto cancel_id = std::make_shared<std::string>();
  auto* cancel = app.add_subcommand("cancel", "cancel a session");
  cancel->add_option("id", *cancel_id, "session id")->required();
  cancel->callback([&ctx, cancel_id] {
    ctx.Resolve();
    auto s = ctx.Api().Cancel(*cancel_id);
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << "cancel requested for " << s->id << " (status " << s->status << ")\n";
    }
  });
  // sinew close SESSION: a conversation that stays open (keep_open) completes.
  auto close_id = std::make_shared<std::string>();
  auto* close = app.add_subcommand("close", "close a session created with keep_open (it completes)");
  close->add_option("id", *close_id, "session id")->required();
  close->callback([&ctx, close_id] {
    ctx.Resolve();
    auto s = ctx.Api().Close(*close_id);
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << "close requested for " << s->id << " (status " << s->status << ")\n";
    }
  });
  // sinew interrupt SESSION MESSAGE: what runs is cut; the session goes on with MESSAGE.
  auto interrupt_id = std::make_shared<std::string>();
  auto interrupt_text = std::make_shared<std::string>();
  auto* interrupt = app.add_subcommand(
      "interrupt", "cut the model call or tool call under way; the session goes on with the message");
  interrupt->add_option("id", *interrupt_id, "session id")->required();
  interrupt->add_option("message", *interrupt_text, "what the model is told")->required();
  interrupt->callback([&ctx, interrupt_id, interrupt_text] {
    ctx.Resolve();
    auto s = ctx.Api().Interrupt(*interrupt_id, *interrupt_text);
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << "interrupt sent to " << s->id << " (status " << s->status << ")\n";
    }
  });
  // sinew approve | deny SESSION CALL_ID [--message M]
  for (const bool approve : {true, false}) {
    struct Args {
      std::string id, call_id, message;
    };
    auto decision = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(approve ? "approve" : "deny",
                                   approve ? "approve a tool call that waits for a decision (requires_action)"
                                           : "deny a tool call that waits for a decision; the model gets an error");
    cmd->add_option("id", decision->id, "session id")->required();
    cmd->add_option("call_id", decision->call_id, "the tool call's id (sinew sessions show lists the pending ones)")
        ->required();
    cmd->add_option("--message,-m", decision->message, "a message for the model (with a denial)");
    cmd->callback([&ctx, decision, approve] {
      ctx.Resolve();
      auto s = ctx.Api().Decide(decision->id, decision->call_id, approve, decision->message);
      if (!s.ok()) return ctx.Fail(s.status());
      if (ctx.json) {
        std::cout << json::serialize(s->raw) << "\n";
      } else {
        std::cout << (approve ? "approved " : "denied ") << decision->call_id << " of " << s->id << " (status "
                  << s->status << ")\n";
      }
    });
  }
  auto msg_id = std::make_shared<std::string>();
  auto msg_text = std::make_shared<std::string>();
  auto* message = app.add_subcommand("message", "send a follow-up user message");
  message->add_option("id", *msg_id, "session id")->required();
  message->add_option("text", *msg_text, "the message")->required();
  message->callback([&ctx, msg_id, msg_text] {
    ctx.Resolve();
    auto s = ctx.Api().Message(*msg_id, *msg_text);
    if (!s.ok()) return ctx.Fail(s.status());
    if (ctx.json) {
      std::cout << json::serialize(s->raw) << "\n";
    } else {
      std::cout << "message sent to " << s->id << " (status " << s->status << ")\n";
    }
  });
}

}  // namespace sinew::cli
