// sinew-store: the session store as a gRPC server.
//   sinew-store --db DIR [--listen 127.0.0.1:7701] [--durability sync|async]
//               [--replication sync|async] [--tls-cert F --tls-key F --tls-ca F | --insecure]
//   sinew-store --db DIR --follow PRIMARY_HOST:PORT [--follower-name NAME]
//   sinew-store --db DIR --etcd HOST:PORT --shard-id ID --replication sync|async   (a member
//               of a replicated shard: elected primary or follower)
//   any of them [--metrics-listen HOST:PORT]   (GET /metrics)
// Prints "sinew-store listening on HOST:PORT" once it serves (port 0 picks a free port);
// a follower prints "sinew-store following HOST:PORT from sequence N" once it has started;
// with --metrics-listen, "sinew-store metrics on HOST:PORT" comes before either.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <thread>
#include <fstream>
#include <cstdio>
#include <optional>

#include "sinew/grpc_tls.h"
#include "sinew/grpc_tls_flags.h"
#include "sinew/log.h"
#include "sinew/log_flags.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/session_store/replication.h"
#include "sinew/session_store/session_store.h"
#include "sinew/session_store/shard_map.h"
#include "sinew/session_store/store_service.h"
#include "metered_store.h"
#include "shard_member.h"
#include "shard_status.h"
#include "store_metrics.h"

namespace {

// A store directory belongs to one shard for good: its id is kept in <db>/SHARD, and a
// different --shard-id is refused (it would send the sessions' lookups elsewhere).
sinew::Status JoinShardMap(const std::string& db, const std::string& etcd, const sinew::GrpcTlsOptions& etcd_tls,
                           const std::string& shard_id, const std::string& advertise,
                           std::chrono::milliseconds grace) {
  const std::string marker = db + "/SHARD";
  std::string recorded;
  if (std::ifstream in(marker); in) std::getline(in, recorded);
  if (!recorded.empty() && recorded != shard_id) {
    return sinew::Status::FailedPrecondition(db + " holds store shard '" + recorded + "', not '" + shard_id + "'");
  }
  auto client = sinew::coord::EtcdClient::Connect(etcd, std::chrono::seconds(5), etcd_tls);
  if (!client.ok()) return client.status();
  SINEW_RETURN_IF_ERROR(sinew::store::RegisterShard(client->get(), shard_id, advertise, grace));
  if (recorded.empty()) {
    std::ofstream out(marker);
    out << shard_id << "\n";
    if (!out.flush()) return sinew::Status::IOError("cannot write " + marker);
  }
  return sinew::Status::Ok();
}

// Records, after this member won the election, who leads the shard from when (shown by
// `sinew-storectl shards`). The term is the one ShardMember wrote into <db>/TERM.
sinew::Status RecordLeading(const std::string& db, const std::string& etcd, const sinew::GrpcTlsOptions& etcd_tls,
                            const std::string& shard_id, const std::string& advertise) {
  std::ifstream in(db + "/TERM");
  int64_t term = 0;
  if (!(in >> term) || term == 0) return sinew::Status::FailedPrecondition("no term in " + db + "/TERM");
  auto client = sinew::coord::EtcdClient::Connect(etcd, std::chrono::seconds(5), etcd_tls);
  if (!client.ok()) return client.status();
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return sinew::store::RecordElection(client->get(), shard_id, term, advertise, now_ms);
}

// --metrics-listen HOST:PORT as server options: HTTPS with the store's certificate when it
// has one; plain HTTP only on loopback unless --insecure.
sinew::Result<sinew::http::ServerOptions> MetricsServerOptions(const std::string& listen,
                                                               const sinew::GrpcTlsOptions& tls, bool insecure) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return sinew::Status::InvalidArgument("--metrics-listen must be host:port, not '" + listen + "'");
  }
  sinew::http::ServerOptions options;
  options.host = listen.substr(0, colon);
  if (options.host.size() > 2 && options.host.front() == '[' && options.host.back() == ']') {
    options.host = options.host.substr(1, options.host.size() - 2);
  }
  try {
    const int port = std::stoi(listen.substr(colon + 1));
    if (port < 0 || port > 65535) throw std::out_of_range("port");
    options.port = static_cast<uint16_t>(port);
  } catch (const std::exception&) {
    return sinew::Status::InvalidArgument("--metrics-listen: bad port in '" + listen + "'");
  }
  options.io_threads = 1;
  options.server_name = "sinew-store";
  options.tls.cert_file = tls.cert_file;
  options.tls.key_file = tls.key_file;
  SINEW_RETURN_IF_ERROR(sinew::http::CheckPlainOnlyOnLoopback(options.host, tls.enabled(), insecure, "--insecure"));
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sinew-store: the Sinew session store (append-only event log in RocksDB)"};
  std::string db = "data/store";
  std::string listen = "127.0.0.1:7701";
  std::string durability = "sync";
  size_t max_event_bytes = 4u << 20;
  app.add_option("--db", db, "store directory (created when missing)")->capture_default_str();
  app.add_option("--listen", listen, "gRPC address host:port (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--durability", durability,
                 "sync: ack after WAL fsync (default); async: WAL written, not synced")
      ->check(CLI::IsMember({"sync", "async"}))
      ->capture_default_str();
  app.add_option("--max-event-bytes", max_event_bytes, "largest accepted event")
      ->capture_default_str();
  sinew::GrpcTlsOptions tls;
  sinew::AddGrpcTlsFlags(app, &tls, /*client=*/false);
  bool insecure = false;
  app.add_flag("--insecure", insecure, "allow plain gRPC (no mTLS) on a non-loopback --listen");
  std::string etcd, shard_id, advertise;
  uint32_t shard_grace_ms = 30000;
  app.add_option("--etcd", etcd, "etcd host:port: join the store shard map (docs/scale-out.md)");
  sinew::GrpcTlsOptions etcd_tls;
  sinew::AddGrpcTlsFlags(app, &etcd_tls, /*client=*/true, "--etcd-tls");
  app.add_option("--shard-id", shard_id, "this store's shard id in the map (with --etcd)");
  app.add_option("--advertise", advertise,
                 "address clients dial for this shard, host:port (with --etcd; default: the listening address)");
  app.add_option("--shard-grace-ms", shard_grace_ms,
                 "when this shard is new to the map, new sessions start coming to it this long after it joins "
                 "(every client must have seen the map by then)")
      ->capture_default_str();
  std::string replication, follow, follower_name = "follower";
  uint32_t follower_timeout_ms = 10000;
  app.add_option("--replication", replication,
                 "serve as a shard's primary with followers (docs/session-store.md): sync acknowledges a write "
                 "once a follower has synced it, async at once")
      ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--follower-timeout-ms", follower_timeout_ms,
                 "with --replication sync: how long a write waits for a follower before it fails (unavailable)")
      ->capture_default_str();
  std::string when_alone = "block";
  app.add_option("--when-no-follower", when_alone,
                 "with --replication sync and no follower in sync: block (writes fail after "
                 "--follower-timeout-ms) or degrade (acknowledge without one, logged)")
      ->check(CLI::IsMember({"block", "degrade"}))
      ->capture_default_str();
  int64_t primary_lease_seconds = 5;
  app.add_option("--primary-lease-seconds", primary_lease_seconds,
                 "with --replication and --etcd: the TTL of the shard primary's etcd lease (how long a failover "
                 "waits for a primary that died)")
      ->check(CLI::Range(int64_t{2}, int64_t{60}))
      ->capture_default_str();
  int64_t member_lease_seconds = 0;
  app.add_option("--member-lease-seconds", member_lease_seconds,
                 "with --replication and --etcd: the TTL of the etcd lease under which a member publishes its "
                 "progress; an election waits this long for a member that stopped answering while it followed "
                 "(default: --primary-lease-seconds)")
      ->check(CLI::Range(int64_t{2}, int64_t{600}));
  uint32_t wal_ttl_seconds = 3600;
  app.add_option("--wal-ttl-seconds", wal_ttl_seconds,
                 "with --replication: how long the primary keeps its write-ahead log for followers that fall "
                 "behind (one further behind is seeded from a checkpoint)")
      ->check(CLI::Range(1u, 30u * 24 * 3600))
      ->capture_default_str();
  app.add_option("--follow", follow, "be a follower: keep --db a copy of the primary at this host:port");
  app.add_option("--follower-name", follower_name, "with --follow: this follower's name in the primary's status")
      ->capture_default_str();
  std::string metrics_listen;
  app.add_option("--metrics-listen", metrics_listen,
                 "serve GET /metrics (Prometheus text) on this host:port (port 0: any free port); HTTPS with "
                 "--tls-cert/--tls-key, else plain HTTP on loopback only (or --insecure)");
  sinew::logging::LogFlags log_flags;
  sinew::logging::AddLogFlags(app, &log_flags);
  CLI11_PARSE(app, argc, argv);
  const bool member = !replication.empty() && !etcd.empty();
  if (!follow.empty() && (!replication.empty() || !etcd.empty())) {
    std::fprintf(stderr, "sinew-store: --follow serves nothing: it goes without --replication and --etcd\n");
    return 2;
  }
  if (etcd.empty() != shard_id.empty()) {
    std::fprintf(stderr, "sinew-store: --etcd and --shard-id go together\n");
    return 2;
  }
  if (auto logs = sinew::logging::SetupLogging("sinew-store", log_flags.format, log_flags.level); !logs.ok()) {
    std::fprintf(stderr, "sinew-store: %s\n", logs.ToString().c_str());
    return 2;
  }
  if (auto files = sinew::CheckGrpcTlsFiles(tls); !files.ok()) {
    spdlog::error("{}", files.message());
    return 2;
  }
  if (auto files = sinew::CheckGrpcTlsFiles(etcd_tls); !files.ok()) {
    spdlog::error("--etcd-tls: {}", files.message());
    return 2;
  }
  if (auto plain = sinew::CheckPlainGrpcOnlyOnLoopback(listen, tls.enabled(), insecure, "--insecure");
      !plain.ok()) {
    spdlog::error("{}", plain.message());
    return 2;
  }

  std::optional<sinew::http::ServerOptions> metrics_options;
  if (!metrics_listen.empty()) {
    auto parsed = MetricsServerOptions(metrics_listen, tls, insecure);
    if (!parsed.ok()) {
      spdlog::error("{}", parsed.status().message());
      return 2;
    }
    metrics_options = *parsed;
  }
  // The counters every write adds to (MeteredStore); served with --metrics-listen.
  sinew::Metrics counters({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10});
  sinew::store::MeteredStore::Describe(&counters);
  std::unique_ptr<sinew::store::StoreMetricsServer> metrics_server;
  auto start_metrics = [&](sinew::store::StoreMetricsSource source) -> bool {
    if (!metrics_options) return true;
    auto started = sinew::store::StoreMetricsServer::Start(*metrics_options, &counters, std::move(source));
    if (!started.ok()) {
      spdlog::error("--metrics-listen: {}", started.status().ToString());
      return false;
    }
    metrics_server = std::move(*started);
    std::printf("sinew-store metrics on %s\n", metrics_server->address().c_str());
    std::fflush(stdout);
    return true;
  };

  // Block the stop signals before any thread starts, then wait for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Only now: gRPC starts threads, which must inherit the blocked signals.
  auto credentials = sinew::GrpcServerCredentials(tls);
  if (!credentials.ok()) {
    spdlog::error("{}", credentials.status().message());
    return 2;
  }

  if (!follow.empty()) {
    sinew::store::FollowerOptions follower_options;
    follower_options.name = follower_name;
    follower_options.tls = tls;
    follower_options.keep_files = {"SHARD"};
    auto follower = sinew::store::Follower::Start(db, follow, follower_options);
    if (!follower.ok()) {
      spdlog::error("cannot open store: {}", follower.status().ToString());
      return 2;
    }
    sinew::store::StoreMetricsSource source;
    source.db = db;
    source.follower = true;
    source.follower_applied = [f = follower->get()] { return f->AppliedSequence(); };
    if (!start_metrics(std::move(source))) return 2;
    std::printf("sinew-store following %s from sequence %llu\n", follow.c_str(),
                static_cast<unsigned long long>((*follower)->AppliedSequence() + 1));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("signal {}: stopping; {} is synced through sequence {}", sig, db, (*follower)->AppliedSequence());
    metrics_server.reset();  // it reads the follower
    return 0;
  }

  sinew::store::StoreOptions options;
  options.durability =
      durability == "async" ? sinew::store::Durability::kAsync : sinew::store::Durability::kSync;
  options.max_event_bytes = max_event_bytes;
  std::unique_ptr<sinew::store::Primary> primary;
  std::unique_ptr<sinew::store::SessionStore> plain;
  std::unique_ptr<sinew::coord::EtcdClient> member_etcd;
  std::unique_ptr<sinew::store::ShardMember> shard_member;
  sinew::store::PrimaryOptions primary_options;
  primary_options.mode =
      replication == "async" ? sinew::store::ReplicationMode::kAsync : sinew::store::ReplicationMode::kSync;
  primary_options.follower_timeout = std::chrono::milliseconds(follower_timeout_ms);
  primary_options.degrade_when_alone = when_alone == "degrade";
  primary_options.wal_ttl = std::chrono::seconds(wal_ttl_seconds);
  sinew::store::SessionStore* store = nullptr;
  if (member) {
    // Elected in etcd; the store it serves switches between primary and refusals.
    auto client = sinew::coord::EtcdClient::Connect(etcd, std::chrono::seconds(5), etcd_tls);
    if (!client.ok()) {
      spdlog::error("--etcd: {}", client.status().ToString());
      return 2;
    }
    member_etcd = std::move(*client);
    sinew::store::ShardMember::Options mo;
    mo.db = db;
    mo.shard_id = shard_id;
    mo.store = options;
    mo.primary = primary_options;
    mo.follow_tls = tls;
    mo.ttl_seconds = primary_lease_seconds;
    mo.member_ttl_seconds = member_lease_seconds > 0 ? member_lease_seconds : primary_lease_seconds;
    shard_member = std::make_unique<sinew::store::ShardMember>(member_etcd.get(), std::move(mo));
    store = shard_member->store();
  } else if (!replication.empty()) {
    auto opened = sinew::store::OpenPrimaryStore(db, options, primary_options);
    if (!opened.ok()) {
      spdlog::error("cannot open store: {}", opened.status().ToString());
      return 2;
    }
    primary = std::move(*opened);
    store = primary->store();
  } else {
    auto opened = sinew::store::OpenSessionStore(db, options);
    if (!opened.ok()) {
      spdlog::error("cannot open store: {}", opened.status().ToString());
      return 2;
    }
    plain = std::move(*opened);
    store = plain.get();
  }
  std::function<std::shared_ptr<sinew::store::Primary>()> current_primary;
  if (shard_member) {
    current_primary = [m = shard_member.get()] { return m->primary(); };
  } else if (primary) {
    // Not owned here: `primary` outlives the server.
    current_primary = [p = primary.get()] { return std::shared_ptr<sinew::store::Primary>(std::shared_ptr<void>(), p); };
  }
  sinew::store::MeteredStore metered(store, &counters, current_primary, primary_options);
  auto service = sinew::store::NewStoreService(&metered);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  sinew::store::ConfigureStoreServer(&builder);
  builder.RegisterService(service.get());
  if (primary) builder.RegisterService(primary->service());
  if (shard_member) builder.RegisterService(shard_member->replication_service());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    spdlog::error("cannot listen on {} (address in use? try --listen 127.0.0.1:0)", listen);
    return 3;
  }
  std::string host = listen.substr(0, listen.rfind(':'));
  if (shard_member) {
    if (advertise.empty()) advertise = host + ":" + std::to_string(port);
  } else if (!etcd.empty()) {
    // Joined before the listening line, so that whoever waits for that line finds the
    // shard in the map.
    if (advertise.empty()) advertise = host + ":" + std::to_string(port);
    if (auto joined = JoinShardMap(db, etcd, etcd_tls, shard_id, advertise, std::chrono::milliseconds(shard_grace_ms));
        !joined.ok()) {
      spdlog::error("cannot join the store shard map: {}", joined.ToString());
      return 2;
    }
    spdlog::info("store shard '{}' at {} in the map at {}", shard_id, advertise, etcd);
  }
  {
    sinew::store::StoreMetricsSource source;
    source.db = db;
    source.shard_id = shard_id;
    source.member = shard_member ? advertise : "";
    source.replication = replication;
    source.primary = current_primary;
    source.etcd = member_etcd.get();
    if (!start_metrics(std::move(source))) return 2;
  }
  std::printf("sinew-store listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);
  spdlog::info("serving {} ({} durability, {}{})", db, durability, tls.enabled() ? "mTLS" : "plain gRPC",
               replication.empty() ? "" : ", primary with " + replication + " replication");

  std::atomic<bool> stop{false};
  std::thread campaign;
  std::atomic<int> exit_code{0};
  if (shard_member) {
    shard_member->SetAdvertise(advertise, [=] {
      SINEW_RETURN_IF_ERROR(
          JoinShardMap(db, etcd, etcd_tls, shard_id, advertise, std::chrono::milliseconds(shard_grace_ms)));
      if (sinew::Status recorded = RecordLeading(db, etcd, etcd_tls, shard_id, advertise); !recorded.ok()) {
        spdlog::warn("store shard '{}': the election is not recorded for sinew-storectl: {}", shard_id,
                     recorded.ToString());
      }
      return sinew::Status::Ok();
    });
    campaign = std::thread([&] {
      sinew::Status ended = shard_member->Run(&stop);
      if (!ended.ok()) {
        spdlog::error("{}", ended.ToString());
        exit_code = 3;
        kill(getpid(), SIGTERM);  // ends the wait below
      }
    });
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  stop = true;
  if (campaign.joinable()) campaign.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  metrics_server.reset();
  return exit_code.load();
}
