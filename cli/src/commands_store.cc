// sinew store inspect | store backup: work on a store directory, without any server.
#include <iostream>

#include "context.h"
#include "sinew/proto_json.h"
#include "sinew/session_store/inspect.h"
#include "sinew/session_store/session_store.h"

namespace sinew::cli {
namespace json = boost::json;

namespace {

void Inspect(Context& ctx, const std::string& db, const std::string& session) {
  store::StoreOptions ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  auto st = store::OpenSessionStore(db, ro);
  if (!st.ok()) return ctx.Fail(st.status());
  if (!session.empty()) {
    v1::GetEventsRequest req;
    req.set_session_id(session);
    auto meta = (*st)->GetSession(session);
    if (!meta.ok()) return ctx.Fail(meta.status());
    int64_t t0 = meta->created_unix_ms();
    for (uint64_t from = 1;; from += 1000) {
      req.set_from_seq(from);
      req.set_limit(1000);
      auto page = (*st)->GetEvents(req);
      if (!page.ok()) {
        ctx.Fail(page.status(), kExitFailed);
        break;
      }
      if (page->events_size() == 0) break;
      for (const auto& ev : page->events()) {
        std::cout << (ctx.json ? ProtoJsonLine(ev) : RenderEvent(ev, t0, ctx.Render())) << "\n";
      }
    }
  } else {
    v1::ListSessionsRequest req;
    req.set_page_size(1000);
    std::vector<SessionRow> rows;
    do {
      auto page = (*st)->ListSessions(req);
      if (!page.ok()) {
        ctx.Fail(page.status(), kExitFailed);
        break;
      }
      for (const auto& s : page->sessions()) {
        if (ctx.json) {
          std::cout << ProtoJsonLine(s) << "\n";
        } else {
          rows.push_back({s.id(), store::SessionStatusName(s.status()), s.title(),
                          s.updated_unix_ms(), s.next_seq() - 1});
        }
      }
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    if (!ctx.json) std::cout << RenderSessionTable(rows, ctx.color);
  }
  st->reset();
  if (ctx.interactive && !ctx.json) std::cerr << "verifying integrity of " << db << " ...\n";
  auto report = store::InspectStore(db);
  if (!report.ok()) return ctx.Fail(report.status(), kExitFailed);
  if (ctx.json) {
    json::array problems;
    for (const auto& p : report->problems) {
      problems.push_back(json::object{{"session_id", p.session_id}, {"seq", p.seq},
                                      {"kind", p.kind}, {"detail", p.detail}});
    }
    std::cout << json::serialize(json::object{{"integrity", json::object{
        {"sessions", report->sessions}, {"events", report->events},
        {"ok", report->ok()}, {"problems", problems}}}}) << "\n";
  } else {
    std::cout << "integrity: " << report->sessions << " sessions, " << report->events
              << " events, " << (report->ok() ? "no problems" : std::to_string(report->problems.size()) + " problems") << "\n";
    for (const auto& p : report->problems) {
      std::cout << "  " << p.kind << "  session " << (p.session_id.empty() ? "-" : p.session_id)
                << (p.seq ? " event #" + std::to_string(p.seq) : "") << ": " << p.detail << "\n";
    }
  }
  if (!report->ok()) ctx.exit_code = kExitFailed;
}

}  // namespace

void AddStoreCommands(CLI::App& app, Context& ctx) {
  auto* store_cmd = app.add_subcommand("store", "work on a store directory directly (no server)");
  store_cmd->require_subcommand(1);
  auto db = std::make_shared<std::string>();
  auto session = std::make_shared<std::string>();
  auto* inspect = store_cmd->add_subcommand(
      "inspect", "list sessions or print one session's events, then verify integrity "
                 "(read-only; exit 1 when damage is found)");
  inspect->add_option("--db", *db, "store directory")->required();
  inspect->add_option("--session", *session, "print this session's events");
  inspect->callback([&ctx, db, session] { Inspect(ctx, *db, *session); });

  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto* backup = store_cmd->add_subcommand("backup", "consistent copy of a store directory");
  backup->add_option("--db", *from, "store directory")->required();
  backup->add_option("--to", *to, "target directory (must not exist)")->required();
  backup->callback([&ctx, from, to] {
    auto st = store::OpenSessionStore(*from, store::StoreOptions{.create_if_missing = false});
    if (!st.ok()) {
      std::string hint = st.status().code() == StatusCode::kUnavailable
                             ? "; a running sinew-store holds it: back it up online with "
                               "`sinew-storectl --store ADDR backup --to DIR`"
                             : "";
      return ctx.Fail(Status(st.status().code(), st.status().message() + hint));
    }
    Status s = (*st)->Checkpoint(*to);
    if (!s.ok()) return ctx.Fail(s);
    if (ctx.json) {
      std::cout << json::serialize(json::object{{"backup", *to}}) << "\n";
    } else {
      std::cout << "backup of " << *from << " written to " << *to << "\n";
    }
  });
}

}  // namespace sinew::cli
