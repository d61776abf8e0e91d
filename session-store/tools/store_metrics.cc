#include "store_metrics.h"

#include <fstream>
#include <vector>

namespace sinew::store {
namespace {

constexpr const char* kFailoversSeen = "sinew_store_failovers_seen_total";
constexpr auto kWatchEvery = std::chrono::milliseconds(500);

// A label value in the text format: backslash, quote and newline escaped.
std::string LabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The term <db>/TERM names (the term its log is complete for); 0 when none.
int64_t DirectoryTerm(const std::string& db) {
  std::ifstream in(db + "/TERM");
  int64_t term = 0;
  if (in) in >> term;
  return in ? term : 0;
}

}  // namespace

StoreMetricsServer::StoreMetricsServer(Metrics* counters, StoreMetricsSource source)
    : counters_(counters), source_(std::move(source)) {
  counters_->Describe(kFailoversSeen, MetricType::kCounter,
                      "Changes of the shard's primary (its term) this process has seen in etcd");
  counters_->Add(kFailoversSeen, "", 0);
}

StoreMetricsServer::~StoreMetricsServer() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  if (server_) server_->Stop(std::chrono::seconds(1));
}

Result<std::unique_ptr<StoreMetricsServer>> StoreMetricsServer::Start(
    const http::ServerOptions& options, Metrics* counters, StoreMetricsSource source) {
  std::unique_ptr<StoreMetricsServer> self(new StoreMetricsServer(counters, std::move(source)));
  StoreMetricsServer* raw = self.get();
  SINEW_ASSIGN_OR_RETURN(
      self->server_,
      http::Server::Start(
          options, [raw](http::Request request, std::shared_ptr<http::ResponseStream> stream) {
            const std::string path = request.target.substr(0, request.target.find('?'));
            if (path != "/metrics") {
              stream->Send(
                  404, "application/json",
                  http::DefaultErrorBody(404, "not_found", "this server has only GET /metrics"));
            } else if (request.method != "GET" && request.method != "HEAD") {
              stream->Send(http::Response{
                  405,
                  "application/json",
                  http::DefaultErrorBody(405, "method_not_allowed", "/metrics answers GET only"),
                  {{"Allow", "GET"}}});
            } else {
              stream->Send(200, "text/plain; version=0.0.4; charset=utf-8", raw->Render());
            }
          }));
  if (self->source_.etcd != nullptr && !self->source_.shard_id.empty() &&
      !self->source_.member.empty()) {
    self->watcher_ = std::thread([raw] { raw->WatchTerm(); });
  }
  return self;
}

void StoreMetricsServer::WatchTerm() {
  const std::string key = "/sinew/store-primaries/" + source_.shard_id;
  while (!stop_) {
    if (auto listing = source_.etcd->GetPrefix(key); listing.ok()) {
      for (const auto& kv : listing->kvs) {
        if (kv.key != key) continue;
        std::lock_guard<std::mutex> lock(mu_);
        if (term_ != 0 && kv.create_revision != term_) counters_->Add(kFailoversSeen, "");
        term_ = kv.create_revision;
        primary_address_ = kv.value;
      }
    }
    for (auto waited = std::chrono::milliseconds(0); waited < kWatchEvery && !stop_;
         waited += kWatchEvery / 5) {
      std::this_thread::sleep_for(kWatchEvery / 5);
    }
  }
}

std::string StoreMetricsServer::Render() {
  Metrics now({});
  std::shared_ptr<Primary> primary = source_.primary ? source_.primary() : nullptr;
  int64_t term = 0;
  std::string primary_address;
  {
    std::lock_guard<std::mutex> lock(mu_);
    term = term_;
    primary_address = primary_address_;
  }
  std::string role = "standalone";
  if (primary) {
    role = "primary";
  } else if (source_.follower) {
    role = "follower";
  } else if (!source_.member.empty()) {
    role = !primary_address.empty() && primary_address != source_.member ? "follower" : "candidate";
  }
  now.Describe(
      "sinew_store_info", MetricType::kGauge,
      "1, labelled with the shard, the address this member advertises and the replication mode");
  now.Set("sinew_store_info",
          "shard=\"" + LabelValue(source_.shard_id) + "\",member=\"" + LabelValue(source_.member) +
              "\",replication=\"" +
              LabelValue(source_.replication.empty() ? "none" : source_.replication) + "\"",
          1);
  now.Describe("sinew_store_role", MetricType::kGauge,
               "1 for this store's role now: primary, follower, candidate (a member while no "
               "primary is known) "
               "or standalone (not replicated)");
  for (const char* r : {"primary", "follower", "candidate", "standalone"}) {
    now.Set("sinew_store_role", std::string("role=\"") + r + "\"", role == r ? 1 : 0);
  }
  if (term != 0) {
    now.Describe(
        "sinew_store_term", MetricType::kGauge,
        "The shard's term: the creation revision of its primary key in etcd, as last seen");
    now.Set("sinew_store_term", "", static_cast<double>(term));
  }
  if (!source_.member.empty()) {
    now.Describe("sinew_store_directory_term", MetricType::kGauge,
                 "The term this member's directory is complete for (<db>/TERM; 0: none)");
    now.Set("sinew_store_directory_term", "", static_cast<double>(DirectoryTerm(source_.db)));
  }
  now.Describe("sinew_store_last_sequence", MetricType::kGauge,
               "The last RocksDB sequence number written here (a primary) or synced here (a "
               "--follow follower)");
  if (primary) {
    const uint64_t latest = primary->LatestSequence();
    now.Set("sinew_store_last_sequence", "", static_cast<double>(latest));
    const std::vector<FollowerStatus> followers = primary->Followers();
    now.Describe("sinew_store_replication_followers", MetricType::kGauge,
                 "Followers streaming from this primary");
    now.Set("sinew_store_replication_followers", "", static_cast<double>(followers.size()));
    now.Describe("sinew_store_replication_follower_synced_sequence", MetricType::kGauge,
                 "The last sequence number each follower has synced to its disk");
    now.Describe("sinew_store_replication_follower_lag", MetricType::kGauge,
                 "Sequence numbers each follower is behind this primary (async mode: what losing "
                 "the primary "
                 "now would lose)");
    now.Describe("sinew_store_replication_follower_in_sync", MetricType::kGauge,
                 "1 while a follower counts for sync acknowledgements, 0 while it catches up or "
                 "after it stalled");
    for (const auto& f : followers) {
      const std::string labels = "follower=\"" + LabelValue(f.name) + "\"";
      now.Set("sinew_store_replication_follower_in_sync", labels, f.in_sync ? 1 : 0);
      now.Set("sinew_store_replication_follower_synced_sequence", labels,
              static_cast<double>(f.synced_sequence));
      now.Set("sinew_store_replication_follower_lag", labels,
              static_cast<double>(latest > f.synced_sequence ? latest - f.synced_sequence : 0));
    }
  } else if (source_.follower && source_.follower_applied) {
    now.Set("sinew_store_last_sequence", "", static_cast<double>(source_.follower_applied()));
  }
  return counters_->Render(now.Render());
}

}  // namespace sinew::store
