// sinew-storectl: a small client of sinew-store, for operators and the demo.
//   sinew-storectl [--store 127.0.0.1:7701] [--tls-cert F --tls-key F --tls-ca F] create --tenant T [--title X]
//   sinew-storectl append ID --text "hello" [--kind user|note] [--expect N]
//   sinew-storectl events ID [--from N] [--to M]      (one JSON object per line)
//   sinew-storectl watch ID [--from N] [--for SECONDS]
//   sinew-storectl list [--tenant T] [--status S]
//   sinew-storectl backup --to DIR
//   sinew-storectl --etcd HOST:PORT [--etcd-tls-cert F ...] shards [--json]
//                  (each shard's roles, terms, lag and last failover; docs/session-store.md)
#include <CLI/CLI.hpp>
#include <cctype>
#include <iostream>

#include "shard_status_print.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/grpc_tls_flags.h"
#include "sinew/proto_json.h"
#include "sinew/session_store/session_store.h"

namespace {

using sinew::store::SessionStore;

int Fail(const sinew::Status& s) {
  std::cerr << "error: " << s.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sinew-storectl: talk to a sinew-store server"};
  app.require_subcommand(1);
  std::string address = "127.0.0.1:7701";
  if (const char* env = std::getenv("SINEW_STORE")) address = env;
  app.add_option("--store", address, "store address (env SINEW_STORE)")->capture_default_str();
  sinew::store::RemoteOptions remote;
  sinew::AddGrpcTlsFlags(app, &remote.tls, /*client=*/true);

  std::string tenant, title, id, text, kind = "user", status_name, target;
  uint64_t from = 0, to = 0, expect = 0;
  double watch_seconds = 0;
  auto* create = app.add_subcommand("create", "create a session");
  create->add_option("--tenant", tenant, "tenant")->required();
  create->add_option("--title", title, "title");
  auto* append = app.add_subcommand("append", "append a user message or a note");
  append->add_option("id", id, "session id")->required();
  append->add_option("--text", text, "text")->required();
  append->add_option("--kind", kind, "user or note")->check(CLI::IsMember({"user", "note"}));
  append->add_option("--expect", expect, "expected next seq (default: read it first)");
  auto* events = app.add_subcommand("events", "print events as JSON lines");
  events->add_option("id", id, "session id")->required();
  events->add_option("--from", from, "first seq");
  events->add_option("--to", to, "last seq");
  auto* watch = app.add_subcommand("watch", "follow events as they are appended");
  watch->add_option("id", id, "session id")->required();
  watch->add_option("--from", from, "first seq");
  watch->add_option("--for", watch_seconds, "stop after this many idle seconds (0: never)");
  auto* list = app.add_subcommand("list", "list sessions, newest first");
  list->add_option("--tenant", tenant, "tenant");
  list->add_option("--status", status_name, "queued|running|completed|failed|cancelled|...");
  auto* backup = app.add_subcommand("backup", "online checkpoint of the store");
  backup->add_option("--to", target, "target directory (must not exist)")->required();
  std::string etcd;
  app.add_option("--etcd", etcd, "etcd host:port, for `shards`");
  sinew::GrpcTlsOptions etcd_tls;
  sinew::AddGrpcTlsFlags(app, &etcd_tls, /*client=*/true, "--etcd-tls");
  bool json = false;
  auto* shards = app.add_subcommand(
      "shards", "each store shard: its primary and followers, term, replication lag and last failover");
  shards->add_flag("--json", json, "one JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);

  if (*shards) {
    if (etcd.empty()) return Fail(sinew::Status::InvalidArgument("shards reads etcd: give --etcd HOST:PORT"));
    auto client = sinew::coord::EtcdClient::Connect(etcd, std::chrono::seconds(5), etcd_tls);
    if (!client.ok()) return Fail(client.status());
    auto states = sinew::store::ReadShardStates(client->get(), remote.tls, std::chrono::seconds(5));
    if (!states.ok()) return Fail(states.status());
    std::cout << (json ? sinew::store::ShardStatesJson(*states) + "\n" : sinew::store::ShardStatesTable(*states));
    return 0;
  }

  auto store = sinew::store::ConnectSessionStore(address, remote);
  if (!store.ok()) return Fail(store.status());
  SessionStore& s = **store;

  if (*create) {
    sinew::v1::CreateSessionRequest req;
    req.set_tenant(tenant);
    req.set_title(title);
    auto r = s.CreateSession(req);
    if (!r.ok()) return Fail(r.status());
    std::cout << r->id() << "\n";
  } else if (*append) {
    if (expect == 0) {
      auto meta = s.GetSession(id);
      if (!meta.ok()) return Fail(meta.status());
      expect = meta->next_seq();
    }
    sinew::v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(expect);
    auto* ev = req.add_events();
    if (kind == "user") {
      ev->mutable_user_message()->set_text(text);
    } else {
      ev->mutable_annotation()->set_author("sinew-storectl");
      ev->mutable_annotation()->set_text(text);
    }
    auto r = s.Append(req);
    if (!r.ok()) return Fail(r.status());
    std::cout << "appended seq " << r->first_seq() << "\n";
  } else if (*events) {
    sinew::v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(from);
    req.set_to_seq(to);
    req.set_limit(100000);
    auto r = s.GetEvents(req);
    if (!r.ok()) return Fail(r.status());
    for (const auto& ev : r->events()) std::cout << sinew::ProtoJsonLine(ev) << "\n";
  } else if (*watch) {
    auto w = s.Watch(id, from);
    if (!w.ok()) return Fail(w.status());
    sinew::v1::Event ev;
    while (true) {
      auto ms = watch_seconds > 0 ? static_cast<int64_t>(watch_seconds * 1000) : 3600000;
      auto got = (*w)->Next(&ev, std::chrono::milliseconds(ms));
      if (!got.ok()) return Fail(got.status());
      if (!*got) break;
      std::cout << sinew::ProtoJsonLine(ev) << std::endl;
    }
  } else if (*list) {
    sinew::v1::ListSessionsRequest req;
    req.set_tenant(tenant);
    if (!status_name.empty()) {
      sinew::v1::SessionStatus st;
      std::string upper = status_name;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (!sinew::v1::SessionStatus_Parse("SESSION_STATUS_" + upper, &st)) {
        return Fail(sinew::Status::InvalidArgument("unknown status " + status_name));
      }
      req.set_status(st);
    }
    do {
      auto r = s.ListSessions(req);
      if (!r.ok()) return Fail(r.status());
      for (const auto& m : r->sessions()) std::cout << sinew::ProtoJsonLine(m) << "\n";
      req.set_page_token(r->next_page_token());
    } while (!req.page_token().empty());
  } else if (*backup) {
    sinew::Status st = s.Checkpoint(target);
    if (!st.ok()) return Fail(st);
    std::cout << "checkpoint written to " << target << "\n";
  }
  return 0;
}
