// HarnessImpl: owns the store connection, the model clients, the tools, the drivers
// (one per session being driven here, each a coroutine on the driver threads), the pools
// where their blocking calls run, the lease renewer, the scanner that takes over orphaned
// sessions, and the REST server.
#include "sinew/harness/harness.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <set>
#include <random>
#include <atomic>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "api_handler.h"
#include "async.h"
#include "schedule_records.h"
#include "scheduler.h"
#include "outgoing_http.h"
#include "task_spec.h"
#include "driver.h"
#include "http_server.h"
#include "json_util.h"
#include "sinew/session_store/shard_map.h"
#include "webhook_deliverer.h"
#include "webhook_outbox_store.h"

namespace sinew::harness {
namespace {

std::string RandomHex(size_t n) {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += digits[gen() % 16];
  return out;
}

class HarnessImpl final : public Harness, public SessionControl {
 public:
  explicit HarnessImpl(HarnessConfig config) : config_(std::move(config)) {}
  ~HarnessImpl() override { Stop(); }

  Status Init() {
    InitCurlOnce();
    if (!config_.store_dir.empty()) {
      store::StoreOptions options;
      options.durability = config_.store_durability == "async" ? store::Durability::kAsync : store::Durability::kSync;
      SINEW_ASSIGN_OR_RETURN(store_, store::OpenSessionStore(config_.store_dir, options));
    } else {
      store::RemoteOptions remote;
      remote.tls = config_.grpc_tls;
      if (!config_.store_etcd.empty()) {
        SINEW_ASSIGN_OR_RETURN(store_, store::ConnectShardedSessionStore(config_.store_etcd, remote, config_.etcd_tls));
      } else {
        SINEW_ASSIGN_OR_RETURN(store_, store::ConnectSessionStore(config_.store_address, remote));
      }
    }
    // Drivers and the API append through the outbox writer (docs/harness.md, "Webhooks").
    outbox_store_ = MakeWebhookOutboxStore(store_.get(), &webhook_state_);
    vault_ = Vault::Create(config_.secrets);
    SINEW_RETURN_IF_ERROR(AddBuiltinAgents(&config_));  // a config built in code has none yet
    for (const auto& [name, m] : config_.models) {
      std::string key;
      if (!m.api_key_secret.empty()) key = *vault_->Get(m.api_key_secret);
      auto client = MakeModelClient(m, key);
      if (!client.ok()) return client.status().WithContext("model " + name);
      models_[name] = std::move(client).value();
    }
    proxy_ = std::make_unique<ProxyTools>(config_.http_allow, vault_.get());
    const std::chrono::seconds provision_timeout(config_.sandbox_provision_timeout_seconds);
    if (!config_.sandboxd_etcd.empty()) {
      SINEW_ASSIGN_OR_RETURN(sandboxes_, SandboxBackend::CreateForEtcd(config_.sandboxd_etcd, config_.grpc_tls,
                                                                       config_.etcd_tls, provision_timeout));
    } else {
      sandboxes_ = SandboxBackend::Create(config_.sandboxd_address, config_.grpc_tls, provision_timeout);
    }
    SINEW_ASSIGN_OR_RETURN(api_keys_, ApiKeys::Create(config_));
    quotas_ = std::make_unique<TenantQuotas>(config_.tenants);
    deps_ = Deps();
    StartDriverThreads();
    handler_ = std::make_unique<ApiHandler>(&deps_, this);
    SINEW_ASSIGN_OR_RETURN(server_, HttpServer::Start(config_, handler_.get(), &metrics_,
                                                       StreamExecutors{&driver_context_, store_pool_.get()}));
    if (config_.advertise_url.empty())
      config_.advertise_url = (config_.tls.cert_file.empty() ? "http://" : "https://") + server_->address();
    // The owner names where this harness answers, so that others can forward to it.
    owner_ = config_.advertise_url + "#" + std::to_string(::getpid()) + "-" + RandomHex(8);
    deps_.owner = owner_;
    background_ = std::thread([this] { BackgroundLoop(); });
    deliverer_ = std::make_unique<WebhookDeliverer>(&config_, store_.get(), &webhook_state_);
    deliverer_->Start(owner_, config_.advertise_url);
    scheduler_ = std::make_unique<Scheduler>(
        &deps_, [this](const ScheduleRecord& s, int64_t tick_unix_ms, const std::string& session_id) {
          return handler_->CreateTickSession(s.tenant, s.task_json, s.id, tick_unix_ms, session_id);
        });
    schedules_ = std::thread([this] { ScheduleLoop(); });
    return Status::Ok();
  }

  std::string address() const override { return server_->address(); }
  std::string owner() const override { return owner_; }

  void Wake(const std::string& session_id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    auto it = drivers_.find(session_id);
    if (it != drivers_.end()) {
      it->second->RequestWake();
      return;
    }
    auto driver = std::make_shared<SessionDriver>(deps_, SessionDriver::Pools{store_pool_.get(), blocking_pool_.get()},
                                                  session_id);
    drivers_[session_id] = driver;
    if (active_ < config_.max_sessions_driven) {
      SpawnLocked(std::move(driver));
    } else {
      queue_.push_back(session_id);
    }
  }

  bool DeliverMessage(const std::string& session_id, const std::string& text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = drivers_.find(session_id);
    if (it == drivers_.end()) return false;
    it->second->PostMessage(text);
    return true;
  }

  bool DeliverCancel(const std::string& session_id, const std::string& reason, const v1::Event& audit) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = drivers_.find(session_id);
    if (it == drivers_.end()) return false;
    it->second->PostAudit(audit);
    it->second->RequestCancel(reason);
    return true;
  }

  bool DeliverClose(const std::string& session_id, const v1::Event& audit) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = drivers_.find(session_id);
    if (it == drivers_.end()) return false;
    it->second->PostAudit(audit);
    return true;
  }

  bool DeliverInterrupt(const std::string& session_id, uint64_t seq) override {
    std::shared_ptr<SessionDriver> driver;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = drivers_.find(session_id);
      if (it == drivers_.end()) return false;
      driver = it->second;
    }
    // Outside the lock: stopping a sandbox call is an RPC.
    driver->RequestInterrupt(seq);
    return true;
  }

  Status Ready() override {
    // Over store shards, ready while one shard answers: the others' sessions answer 503
    // until they are back, new sessions go to the shards that answer (docs/scale-out.md).
    v1::ListSessionsRequest req;
    req.set_page_size(1);
    req.set_tenant("-");
    req.set_allow_partial(true);
    auto listed = store_->ListSessions(req);
    if (!listed.ok()) return Status::Unavailable("the session store does not answer: " + listed.status().message());
    if (!config_.sandboxd_address.empty() || !config_.sandboxd_etcd.empty()) {
      Status s = sandboxes_->Health();
      if (!s.ok()) return Status::Unavailable("sinew-sandboxd does not answer: " + s.message());
    }
    return Status::Ok();
  }

  std::string SessionsByStatusMetrics() override {
    std::string out = "# TYPE sinew_harness_sessions gauge\n";
    for (int s = v1::SESSION_STATUS_QUEUED; s <= v1::SESSION_STATUS_REQUIRES_ACTION; ++s) {
      uint64_t count = 0;
      v1::ListSessionsRequest req;
      req.set_status(static_cast<v1::SessionStatus>(s));
      req.set_page_size(1000);
      req.set_allow_partial(true);  // the shards that answer
      for (int page = 0; page < 100; ++page) {  // counts up to 100k sessions per status
        auto resp = store_->ListSessions(req);
        if (!resp.ok()) break;
        count += static_cast<uint64_t>(resp->sessions_size());
        if (resp->next_page_token().empty()) break;
        req.set_page_token(resp->next_page_token());
      }
      out += "sinew_harness_sessions{status=\"" + store::SessionStatusName(static_cast<v1::SessionStatus>(s)) + "\"} " +
             std::to_string(count) + "\n";
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // Driven: coroutines running here; queued: woken, waiting for a place (max_sessions_driven).
    out += "# TYPE sinew_harness_sessions_driven gauge\nsinew_harness_sessions_driven " + std::to_string(active_) +
           "\n# TYPE sinew_harness_sessions_queued gauge\nsinew_harness_sessions_queued " +
           std::to_string(queue_.size()) + "\n";
    for (const auto& [name, client] : models_) out += client->MetricsText(name);
    return out;
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      for (auto& [id, driver] : drivers_) driver->Interrupt();
    }
    bg_cv_.notify_all();
    if (deliverer_) deliverer_->Stop();
    if (server_) server_->Stop();
    {
      // Every driver sees the stop at its next step (a model call in flight was interrupted).
      std::unique_lock<std::mutex> lock(mutex_);
      idle_cv_.wait(lock, [&] { return active_ == 0; });
    }
    // No foreign thread may post to the driver io_context past this point: the model
    // clients' and the tools' HTTP threads are joined, and a gRPC or libcurl thread still
    // inside a post is waited for.
    for (const auto& [name, client] : models_) client->Shutdown();
    if (proxy_) proxy_->Shutdown();
    WaitForForeignPosts();
    driver_work_.reset();
    for (auto& t : driver_threads_) t.join();
    if (store_pool_) store_pool_->join();
    if (blocking_pool_) blocking_pool_->join();
    if (background_.joinable()) background_.join();
    if (schedules_.joinable()) schedules_.join();
  }

 private:
  HarnessDeps Deps() {
    HarnessDeps d;
    d.config = &config_;
    d.store = outbox_store_.get();
    d.vault = vault_.get();
    d.models = &models_;
    d.proxy = proxy_.get();
    d.sandboxes = sandboxes_.get();
    d.metrics = &metrics_;
    d.api_keys = api_keys_.get();
    d.quotas = quotas_.get();
    d.webhooks = &webhook_state_;
    d.owner = owner_;
    d.stopping = &stopping_;
    d.wake = [this](const std::string& id) { Wake(id); };
    return d;
  }

  // The threads that run the drivers' coroutines (one per core: a driver only computes
  // there, every wait is asynchronous or on a pool), the store pool (short calls) and the
  // blocking pool (config.workers threads: model servers, tools, sandboxes).
  void StartDriverThreads() {
    constexpr size_t kStoreThreads = 16;
    store_pool_ = std::make_unique<asio::thread_pool>(kStoreThreads);
    blocking_pool_ = std::make_unique<asio::thread_pool>(config_.workers);
    driver_work_.emplace(asio::make_work_guard(driver_context_));
    const unsigned n = std::max(2u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) driver_threads_.emplace_back([this] { driver_context_.run(); });
  }

  // Starts driving `driver`. Requires mutex_. Posted, never run inline: called from a
  // driver thread, co_spawn alone would start the new session's coroutine right here,
  // under mutex_ and with this thread's log fields.
  void SpawnLocked(std::shared_ptr<SessionDriver> driver) {
    ++active_;
    asio::post(driver_context_, [this, driver = std::move(driver)]() mutable {
      asio::co_spawn(driver_context_, DriveLoop(std::move(driver)), asio::detached);
    });
  }

  // Drives one session for as long as input keeps arriving, then hands its place over to
  // the next queued session.
  Task<void> DriveLoop(std::shared_ptr<SessionDriver> driver) {
    while (true) {
      try {
        co_await driver->Run();
      } catch (const std::exception& e) {  // a bug: keep the process, the scan retries later
        ReplaceLogFields({});
        spdlog::error("session {}: driver failed: {}", driver->id(), e.what());
      } catch (...) {  // the same, so that the session's place is always given back
        ReplaceLogFields({});
        spdlog::error("session {}: driver failed with an unknown exception", driver->id());
      }
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = drivers_.find(driver->id());
      // Replaced while it ran (it had lost its lease, see ScanStatus): the new one drives.
      if (it == drivers_.end() || it->second != driver) break;
      // Input that arrived while it ran gets another wake; otherwise it is done here.
      if (!stopping_ && driver->TakeWork()) continue;
      drivers_.erase(it);
      break;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    --active_;
    while (!stopping_ && !queue_.empty() && active_ < config_.max_sessions_driven) {
      const std::string id = queue_.front();
      queue_.pop_front();
      if (auto it = drivers_.find(id); it != drivers_.end()) SpawnLocked(it->second);
    }
    if (active_ == 0) idle_cv_.notify_all();
  }

  // Renews held leases every third of their ttl; every scan interval, wakes queued and
  // running sessions that no live harness drives (a dead harness's, once its lease expired).
  void BackgroundLoop() {
    auto next_scan = std::chrono::steady_clock::now();
    const auto renew_every = std::chrono::milliseconds(config_.lease_ttl_ms / 3);
    // Passes start every third of the ttl, not a third after the last one ended: a slow
    // pass (a loaded store) must not stretch the time between two renewals past the ttl.
    auto next_renew = std::chrono::steady_clock::now() + renew_every;
    while (true) {
      std::vector<std::shared_ptr<SessionDriver>> active;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        bg_cv_.wait_until(lock, next_renew, [&] { return stopping_.load(); });
        if (stopping_) return;
        for (auto& [id, d] : drivers_) active.push_back(d);
      }
      next_renew = std::max(next_renew + renew_every, std::chrono::steady_clock::now());
      RenewAll(active);
      if (std::chrono::steady_clock::now() >= next_scan) {
        Scan();
        next_scan = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.scan_interval_ms);
      }
    }
  }

  // Renews every held lease, kRenewLanes at a time. One by one, 200 sessions on a loaded
  // store took longer than the lease's ttl, and the harness lost its own sessions to
  // itself (found by scripts/soak.sh). A pass that takes over a third of the ttl is logged.
  void RenewAll(const std::vector<std::shared_ptr<SessionDriver>>& active) {
    constexpr size_t kRenewLanes = 16;
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto lane = [&] {
      for (size_t i = next++; i < active.size(); i = next++) active[i]->RenewLease();
    };
    std::vector<std::thread> lanes;
    for (size_t i = 1; i < std::min(kRenewLanes, active.size()); ++i) lanes.emplace_back(lane);
    lane();
    for (auto& t : lanes) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics_.Observe("sinew_harness_lease_renewal_seconds", "", seconds);
    if (seconds * 1000 > config_.lease_ttl_ms / 3.0) {
      spdlog::warn("renewing {} session leases took {:.0f} ms, over a third of their {} ms ttl", active.size(),
                   seconds * 1000, config_.lease_ttl_ms);
    }
  }

  // Every scan interval, ticks the schedules that are due (scheduler.h). Its own thread: a
  // tick creates sessions, which must not hold up the lease renewals.
  void ScheduleLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        bg_cv_.wait_for(lock, std::chrono::milliseconds(config_.scan_interval_ms), [&] { return stopping_.load(); });
        if (stopping_) return;
      }
      scheduler_->RunDue(NowUnixMs());
    }
  }

  void Scan() {
    std::set<std::string> down;  // store shards that did not answer this scan
    // A session that requires action is driven too: its driver watches for the decisions
    // and the deadlines (docs/harness.md, "Tool approvals").
    // A session waiting for input is woken once it has been idle for its idle_close_seconds
    // (docs/harness.md, "Conversations that stay open"); its driver closes it. One whose
    // last event is a message is woken now: its wake was lost with the harness that took it.
    for (auto status : {v1::SESSION_STATUS_QUEUED, v1::SESSION_STATUS_RUNNING, v1::SESSION_STATUS_REQUIRES_ACTION,
                        v1::SESSION_STATUS_WAITING_FOR_INPUT}) {
      if (!ScanStatus(status, NowUnixMs(), &down)) return;  // the store did not answer: retry later
    }
    for (const auto& s : down) {
      if (!down_shards_.count(s)) spdlog::warn("scan: store shard '{}' does not answer; its sessions wait for it", s);
    }
    for (const auto& s : down_shards_) {
      if (!down.count(s)) spdlog::info("scan: store shard '{}' answers again", s);
    }
    down_shards_ = std::move(down);
  }

  // Wakes the sessions with `status` that nobody drives; adds the store shards that did not
  // answer to *down. False when the listing failed.
  bool ScanStatus(v1::SessionStatus status, int64_t now, std::set<std::string>* down) {
    std::set<std::string> waiting_seen;
    // Forgets the limits of sessions no longer waiting (a complete listing only).
    auto forget = [&] {
      if (status != v1::SESSION_STATUS_WAITING_FOR_INPUT) return;
      std::erase_if(idle_limit_ms_, [&](const auto& kv) { return !waiting_seen.count(kv.first); });
      std::erase_if(last_checked_ms_, [&](const auto& kv) { return !waiting_seen.count(kv.first); });
    };
    v1::ListSessionsRequest req;
    req.set_status(status);
    req.set_page_size(1000);
    // Over store shards, one shard down must not stop take-overs on the others.
    req.set_allow_partial(true);
    for (int page = 0; page < 100; ++page) {
      auto resp = store_->ListSessions(req);
      if (!resp.ok()) return false;
      down->insert(resp->unavailable_shards().begin(), resp->unavailable_shards().end());
      for (const auto& s : resp->sessions()) {
        // Schedules (leased while they tick) and sandboxes are records, not sessions.
        if (ScheduleRecords::IsRecordTenant(s.tenant())) continue;
        // Imported sessions never leased here are records, not work (a message leases
        // one); a running session that was never leased is one too.
        if ((s.imported() || status != v1::SESSION_STATUS_QUEUED) && s.lease_epoch() == 0) continue;
        // Give the harness that created a queued session a moment to wake it itself.
        if (status == v1::SESSION_STATUS_QUEUED && now - s.updated_unix_ms() < 1000) continue;
        // The time of its last append is the time of its last event: before the limit has
        // passed since then, there is nothing to do.
        if (status == v1::SESSION_STATUS_WAITING_FOR_INPUT) {
          waiting_seen.insert(s.id());
          const int64_t limit_ms = IdleLimitMs(s.id());
          const bool idle = limit_ms >= 0 && now - s.updated_unix_ms() >= limit_ms;
          if (!idle && !EndsWithMessage(s)) continue;
        }
        {
          std::lock_guard<std::mutex> lock(mutex_);
          auto it = drivers_.find(s.id());
          if (it != drivers_.end()) {
            // Driven here, unless its driver lost the lease: it writes nothing more, but
            // it may be waiting on a call that ignores the loss, and the session must not
            // wait with it. A new driver takes the session over (as another harness
            // would); the old one, fenced by the store, ends on its own.
            if (!it->second->fenced()) continue;
            spdlog::warn("session {}: its driver here lost the lease and has not stopped; driving it anew",
                         s.id());
            drivers_.erase(it);
          }
        }
        Wake(s.id());
      }
      if (resp->next_page_token().empty()) {
        if (resp->unavailable_shards().empty()) forget();
        break;
      }
      req.set_page_token(resp->next_page_token());
    }
    return true;
  }

  // A waiting session's idle_close_seconds in ms, from its task (its first event), read
  // once; -1 when it cannot be read now (the next scan tries again).
  int64_t IdleLimitMs(const std::string& id) {
    if (auto it = idle_limit_ms_.find(id); it != idle_limit_ms_.end()) return it->second;
    v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(1);
    req.set_to_seq(1);
    req.set_limit(1);
    auto resp = store_->GetEvents(req);
    if (!resp.ok() || resp->events_size() == 0 || !resp->events(0).has_session_created()) return -1;
    auto task = TaskFromJson(resp->events(0).session_created().task_json(), config_);
    if (!task.ok()) return -1;
    const int64_t ms = static_cast<int64_t>(task->idle_close_seconds) * 1000;
    idle_limit_ms_[id] = ms;
    return ms;
  }

  // Whether a waiting session's last event is a message: one acknowledged by a harness
  // that died before it woke the session. Read once per change of the session (its
  // updated time), so a scan of sessions that wait costs no reads.
  bool EndsWithMessage(const v1::Session& s) {
    auto [it, fresh] = last_checked_ms_.try_emplace(s.id(), s.updated_unix_ms());
    if (!fresh && it->second == s.updated_unix_ms()) return false;
    it->second = s.updated_unix_ms();
    if (s.next_seq() < 2) return false;
    v1::GetEventsRequest req;
    req.set_session_id(s.id());
    req.set_from_seq(s.next_seq() - 1);
    req.set_to_seq(s.next_seq() - 1);
    req.set_limit(1);
    auto resp = store_->GetEvents(req);
    if (!resp.ok()) {
      last_checked_ms_.erase(it);  // read it again next scan
      return false;
    }
    return resp->events_size() == 1 && resp->events(0).has_user_message();
  }

  HarnessConfig config_;
  std::set<std::string> down_shards_;  // the last scan's unanswered store shards; background thread only
  std::map<std::string, int64_t> idle_limit_ms_;  // waiting sessions' idle limits; background thread only
  std::map<std::string, int64_t> last_checked_ms_;  // waiting sessions' updated times read; background thread only
  std::unique_ptr<store::SessionStore> store_;
  WebhookState webhook_state_;
  std::unique_ptr<store::SessionStore> outbox_store_;  // store_ writing the webhook outbox ahead
  std::unique_ptr<WebhookDeliverer> deliverer_;
  std::unique_ptr<Vault> vault_;
  std::map<std::string, std::unique_ptr<ModelClient>> models_;
  std::unique_ptr<ProxyTools> proxy_;
  std::unique_ptr<SandboxBackend> sandboxes_;
  // Latency buckets in seconds, from a millisecond store write to a minute-long tool call.
  Metrics metrics_{{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60}};
  std::unique_ptr<ApiKeys> api_keys_;
  std::unique_ptr<TenantQuotas> quotas_;
  HarnessDeps deps_;  // complete once Init() returns
  std::unique_ptr<ApiHandler> handler_;
  std::unique_ptr<HttpServer> server_;
  std::string owner_;
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;
  std::condition_variable idle_cv_;  // active_ reached 0
  std::condition_variable bg_cv_;
  std::map<std::string, std::shared_ptr<SessionDriver>> drivers_;  // guarded by mutex_
  std::deque<std::string> queue_;  // woken, waiting for a place among the driven; guarded by mutex_
  uint32_t active_ = 0;            // drivers running (coroutines spawned); guarded by mutex_
  asio::io_context driver_context_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> driver_work_;
  std::vector<std::thread> driver_threads_;
  std::unique_ptr<asio::thread_pool> store_pool_;
  std::unique_ptr<asio::thread_pool> blocking_pool_;
  std::thread background_;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread schedules_;
};

}  // namespace

Result<std::unique_ptr<Harness>> Harness::Start(const HarnessConfig& config) {
  auto harness = std::make_unique<HarnessImpl>(config);
  SINEW_RETURN_IF_ERROR(harness->Init());
  return std::unique_ptr<Harness>(std::move(harness));
}

}  // namespace sinew::harness
