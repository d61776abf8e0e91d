// SandboxBackend over many sinew-sandboxd hosts registered in etcd (docs/scale-out.md):
// a PrefixMirror of /sinew/sandbox-hosts/ is the host set, PlaceSandbox (placement.h)
// picks the host, and each sandbox is reached through the host its log names.
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <mutex>

#include "placement.h"
#include "sandbox_common.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/coord/prefix_mirror.h"
#include "sinew/proto/coord.pb.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sandbox_backend.h"

namespace sinew::harness {
namespace {

constexpr std::string_view kHostsPrefix = "/sinew/sandbox-hosts/";
// Candidates tried, best first, when a host refuses (full, or just went away).
constexpr size_t kMaxTries = 3;
// A placement stays counted until the host's record is newer than it, or this long.
constexpr int64_t kPendingMaxMs = 10000;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class EtcdSandboxBackend final : public SandboxBackend {
 public:
  EtcdSandboxBackend(std::unique_ptr<coord::EtcdClient> etcd, const GrpcTlsOptions& tls,
                     std::chrono::seconds provision_timeout)
      : etcd_(std::move(etcd)), tls_(tls), provision_timeout_(provision_timeout) {
    mirror_ = coord::PrefixMirror::Start(etcd_.get(), std::string(kHostsPrefix));
  }

  bool configured() const override { return true; }

  Task<Result<Provisioned>> Provision(const std::string& spec_json, const std::string& label,
                                      asio::thread_pool& blocking) override {
    const SandboxSpec spec = ParseSandboxSpec(spec_json);
    if (spec.attach) co_return co_await OnPool(blocking, [&] { return Attach(spec); });
    const auto t0 = std::chrono::steady_clock::now();
    const auto hosts = Hosts();
    Placement placement;
    uint64_t token = 0;  // of the reservation on the host being tried
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<HostLoad> loads;
      loads.reserve(hosts.size());
      for (const auto& [id, rec] : hosts) loads.push_back(Load(rec));
      placement = PlaceSandbox(spec.resources, loads);
      // Count the first choice at once, so that concurrent placements spread.
      if (!placement.ranked.empty())
        token = Reserve(placement.ranked[0].host_id, spec.resources, hosts);
    }
    const int64_t placement_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (placement.ranked.empty()) {
      std::string why;
      for (const auto& r : placement.refused) why += (why.empty() ? "" : "; ") + r;
      if (hosts.empty()) why = "no sandbox host is registered in etcd " + etcd_->endpoint();
      co_return Status::ResourceExhausted("no sandbox host has room for this sandbox (" + why + ")");
    }
    Status last = Status::Unavailable("no host tried");
    for (size_t i = 0; i < placement.ranked.size() && i < kMaxTries; ++i) {
      const PlacementCandidate& c = placement.ranked[i];
      if (i > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        token = Reserve(c.host_id, spec.resources, hosts);
      }
      auto prov = ProvisionerFor(c.address);
      Result<v1::SandboxInfo> info = prov.status();
      if (prov.ok()) info = co_await ProvisionOn(**prov, spec.resources, label);
      Settle(c.host_id, token, info);
      if (info.ok()) {
        Provisioned p = ToProvisioned(*info);
        p.host_id = c.host_id;
        p.host_address = c.address;
        p.placement_us = placement_us;
        spdlog::debug("placed sandbox {} on {} (warm {}, load {:.2f}) in {} us", p.id, c.host_id,
                      c.warm, c.load, placement_us);
        co_return p;
      }
      last = info.status().WithContext("host " + c.host_id);
      const auto code = info.status().code();
      if (code != StatusCode::kUnavailable && code != StatusCode::kResourceExhausted &&
          code != StatusCode::kDeadlineExceeded) {
        co_return last;  // the request itself is wrong (bad resources, missing image)
      }
      spdlog::warn("sandbox placement: {}; trying the next host", last.ToString());
    }
    co_return last;
  }

  Status Connect(const SandboxRef& sandbox) override {
    if (!HostAlive(sandbox)) return Status::Unavailable(HostGone(sandbox));
    return ClientFor(sandbox).status();
  }

  void ExecuteAsync(const SandboxRef& sandbox, const std::string& call_id, const std::string& name,
                    const std::string& input_json, ExecuteDone done) override {
    if (Status connected = Connect(sandbox); !connected.ok()) return done(connected);
    clients_.ExecuteAsync(sandbox.id, call_id, name, input_json, std::move(done));
  }

  Status CancelCall(const SandboxRef& sandbox, const std::string& call_id) override {
    SINEW_RETURN_IF_ERROR(Connect(sandbox));
    return clients_.CancelCall(sandbox.id, call_id);
  }

  std::pair<std::string, std::string> HowItEnded(const SandboxRef& sandbox) override {
    if (!HostAlive(sandbox)) return {"host_lost", HostGone(sandbox)};
    auto prov = ProvisionerFor(sandbox.host_address);
    if (!prov.ok()) return {"crashed", prov.status().message()};
    return AskHowItEnded(**prov, sandbox.id);
  }

  Status Destroy(const SandboxRef& sandbox) override {
    clients_.Forget(sandbox.id);
    // A host that is gone cannot be reached; it reaps its sandboxes when it starts again.
    if (!HostAlive(sandbox) || sandbox.host_address.empty()) return Status::Ok();
    SINEW_ASSIGN_OR_RETURN(auto* prov, ProvisionerFor(sandbox.host_address));
    auto info = prov->Destroy(sandbox.id);
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
    return Status::Ok();
  }

  Status Pause(const SandboxRef& sandbox, bool if_idle) override {
    if (!HostAlive(sandbox) || sandbox.host_address.empty()) {
      return Status::FailedPrecondition("the sandbox's host is not reachable");
    }
    SINEW_ASSIGN_OR_RETURN(auto* prov, ProvisionerFor(sandbox.host_address));
    clients_.Forget(sandbox.id);
    auto info = prov->Pause(sandbox.id, /*owner=*/{}, if_idle);
    return info.ok() ? Status::Ok() : info.status();
  }

  Result<bool> Resume(const SandboxRef& sandbox) override {
    if (!HostAlive(sandbox) || sandbox.host_address.empty()) {
      return Status::Unavailable("the sandbox's host is not reachable");
    }
    SINEW_ASSIGN_OR_RETURN(auto* prov, ProvisionerFor(sandbox.host_address));
    auto info = prov->Resume(sandbox.id);
    if (!info.ok()) return info.status();
    return info->resumed_now();
  }

  bool HostAlive(const SandboxRef& sandbox) override {
    if (sandbox.host_id.empty()) return !sandbox.id.empty();  // not placed by us (attached)
    auto hosts = mirror_->Snapshot();
    auto it = hosts.find(std::string(kHostsPrefix) + sandbox.host_id);
    if (it == hosts.end()) return false;
    v1::SandboxHostRecord rec;
    return rec.ParseFromString(it->second.value) && rec.address() == sandbox.host_address;
  }

  Status Health() override {
    if (!mirror_->WaitSynced(std::chrono::milliseconds(0))) {
      return Status::Unavailable("the sandbox host set is not read from etcd " + etcd_->endpoint() +
                                 " yet");
    }
    if (Hosts().empty())
      return Status::Unavailable("no sandbox host is registered in etcd " + etcd_->endpoint());
    return Status::Ok();
  }

  Result<Provisioned> ProvisionBlocking(const v1::ProvisionRequest& request) override {
    const auto hosts = Hosts();
    if (!request.from_snapshot().empty()) {
      // A snapshot's bytes lie on the host that took it: the new sandbox goes there.
      for (const auto& [id, rec] : hosts) {
        auto prov = ProvisionerFor(rec.address());
        if (!prov.ok()) continue;
        auto listed = (*prov)->ListSnapshots(request.owner());
        if (!listed.ok()) continue;
        for (const auto& snap : listed->snapshots()) {
          if (snap.id() != request.from_snapshot()) continue;
          SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, (*prov)->ProvisionWith(request));
          Provisioned p = ToProvisioned(info);
          p.host_id = id;
          p.host_address = rec.address();
          return p;
        }
      }
      return Status::NotFound("no registered sandbox host holds snapshot " + request.from_snapshot());
    }
    Placement placement;
    uint64_t token = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<HostLoad> loads;
      for (const auto& [id, rec] : hosts) loads.push_back(Load(rec));
      placement = PlaceSandbox(request.resources(), loads);
    }
    if (placement.ranked.empty()) {
      std::string why;
      for (const auto& r : placement.refused) why += (why.empty() ? "" : "; ") + r;
      if (hosts.empty()) why = "no sandbox host is registered in etcd " + etcd_->endpoint();
      return Status::ResourceExhausted("no sandbox host has room for this sandbox (" + why + ")");
    }
    Status last = Status::Unavailable("no host tried");
    for (size_t i = 0; i < placement.ranked.size() && i < kMaxTries; ++i) {
      const PlacementCandidate& c = placement.ranked[i];
      {
        std::lock_guard<std::mutex> lock(mu_);
        token = Reserve(c.host_id, request.resources(), hosts);
      }
      auto prov = ProvisionerFor(c.address);
      Result<v1::SandboxInfo> info = prov.status();
      if (prov.ok()) info = (*prov)->ProvisionWith(request);
      Settle(c.host_id, token, info);
      if (info.ok()) {
        Provisioned p = ToProvisioned(*info);
        p.host_id = c.host_id;
        p.host_address = c.address;
        return p;
      }
      last = info.status().WithContext("host " + c.host_id);
      const auto code = info.status().code();
      if (code != StatusCode::kUnavailable && code != StatusCode::kResourceExhausted &&
          code != StatusCode::kDeadlineExceeded) {
        return last;  // the request itself is wrong (bad resources, missing image)
      }
    }
    return last;
  }

  Result<sandbox::ProvisionerClient*> ProvisionerAt(const std::string& host_address) override {
    return ProvisionerFor(host_address);
  }

  Result<std::vector<HostProvisioner>> AllProvisioners() override {
    std::vector<HostProvisioner> out;
    for (const auto& [id, rec] : Hosts()) {
      SINEW_ASSIGN_OR_RETURN(auto* prov, ProvisionerFor(rec.address()));
      out.push_back(HostProvisioner{id, rec.address(), prov});
    }
    return out;
  }

 private:
  struct Pending {
    uint64_t token = 0;
    v1::Resources resources;   // as the host fills it
    // The host's clock when the sandbox began to count there (SandboxInfo.handed_over_unix_ms);
    // 0 while the Provision call runs.
    int64_t done_unix_ms = 0;
    int64_t started_unix_ms = 0;
  };

  // The registered hosts, by id (records that do not parse are skipped).
  std::map<std::string, v1::SandboxHostRecord> Hosts() {
    std::map<std::string, v1::SandboxHostRecord> out;
    for (const auto& [key, kv] : mirror_->Snapshot()) {
      v1::SandboxHostRecord rec;
      if (!rec.ParseFromString(kv.value) || rec.host_id().empty()) {
        spdlog::warn("etcd: {} does not hold a SandboxHostRecord; skipped", key);
        continue;
      }
      out[rec.host_id()] = std::move(rec);
    }
    return out;
  }

  // REQUIRES: mu_ held. The host with the placements its record does not show yet;
  // forgets those the record shows (it was written after they finished).
  HostLoad Load(const v1::SandboxHostRecord& rec) {
    HostLoad load;
    load.record = rec;
    auto& list = pending_[rec.host_id()];
    const int64_t now = NowUnixMs();
    std::erase_if(list, [&](const Pending& p) {
      return (p.done_unix_ms != 0 && rec.updated_unix_ms() > p.done_unix_ms) ||
             now - p.started_unix_ms > kPendingMaxMs;
    });
    for (const auto& p : list) load.pending.push_back(p.resources);
    return load;
  }
  // REQUIRES: mu_ held. Counts a placement on the host; returns its token for Settle.
  uint64_t Reserve(const std::string& host_id, const v1::Resources& requested,
                   const std::map<std::string, v1::SandboxHostRecord>& hosts) {
    auto it = hosts.find(host_id);
    if (it == hosts.end()) return 0;
    Pending p;
    p.token = ++next_token_;
    p.resources = FillResources(requested, it->second.defaults());
    p.started_unix_ms = NowUnixMs();
    pending_[host_id].push_back(std::move(p));
    return next_token_;
  }
  // The Provision call on `host_id` ended: a success stays counted until the host's
  // record shows it (a record the host wrote after it counted the sandbox: both times are
  // the host's clock); a failure is dropped.
  void Settle(const std::string& host_id, uint64_t token, const Result<v1::SandboxInfo>& info) {
    const bool ok = info.ok();
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = pending_[host_id];
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->token != token) continue;
      if (ok) {
        // A host that does not stamp it: the harness's clock, later than the host's count.
        it->done_unix_ms = info->handed_over_unix_ms() != 0 ? info->handed_over_unix_ms() : NowUnixMs();
      } else {
        list.erase(it);
      }
      return;
    }
  }

  Result<Provisioned> Attach(const SandboxSpec& spec) {
    // The task names only the sandbox: ask every registered host for it.
    for (const auto& [id, rec] : Hosts()) {
      auto prov = ProvisionerFor(rec.address());
      if (!prov.ok()) continue;
      auto info = (*prov)->Get(spec.attach_id);
      if (!info.ok()) continue;
      SINEW_ASSIGN_OR_RETURN(Provisioned p, CheckAttached(*info, spec));
      p.host_id = id;
      p.host_address = rec.address();
      return p;
    }
    return Status::FailedPrecondition("the attached sandbox " + spec.attach_id +
                                      " is on none of the registered sandbox hosts");
  }

  static std::string HostGone(const SandboxRef& sandbox) {
    return "its host " + sandbox.host_id + " (" + sandbox.host_address +
           ") left the cluster: its etcd registration ended (crash, stop or lost lease)";
  }

  Result<sandbox::ProvisionerClient*> ProvisionerFor(const std::string& address) {
    if (address.empty()) return Status::FailedPrecondition("the sandbox has no host address");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = provisioners_.find(address);
    if (it != provisioners_.end()) return it->second.get();
    SINEW_ASSIGN_OR_RETURN(auto client, sandbox::ProvisionerClient::Connect(address, std::chrono::minutes(2), tls_,
                                                                            provision_timeout_));
    auto* raw = client.get();
    provisioners_[address] = std::move(client);
    return raw;
  }

  // A client for the sandbox, from its host's answer for its id (the log names the host).
  Result<sandbox::SandboxClient*> ClientFor(const SandboxRef& sandbox) {
    if (auto* known = clients_.Find(sandbox.id)) return known;
    SINEW_ASSIGN_OR_RETURN(auto* prov, ProvisionerFor(sandbox.host_address));
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, prov->Get(sandbox.id));
    if (info.state() == v1::SANDBOX_STATE_ENDED) {
      return Status::Unavailable("sandbox " + sandbox.id + " has ended");
    }
    SINEW_ASSIGN_OR_RETURN(auto client, sandbox::SandboxClient::ConnectTo(info));
    return clients_.Put(sandbox.id, std::move(client));
  }

  // Constant after construction.
  const std::unique_ptr<coord::EtcdClient> etcd_;
  const GrpcTlsOptions tls_;  // mTLS to every host (config.grpc_tls); plain when empty
  const std::chrono::seconds provision_timeout_;
  std::unique_ptr<coord::PrefixMirror> mirror_;

  std::mutex mu_;
  std::map<std::string, std::vector<Pending>> pending_;  // host id -> ...; guarded by mu_
  uint64_t next_token_ = 0;                              // guarded by mu_
  // Provisioner clients are never erased (one per host address ever used).
  std::map<std::string, std::unique_ptr<sandbox::ProvisionerClient>>
      provisioners_;  // guarded by mu_
  SandboxClients clients_;
};

}  // namespace

Result<std::unique_ptr<SandboxBackend>> SandboxBackend::CreateForEtcd(const std::string& etcd,
                                                                      const GrpcTlsOptions& tls,
                                                                      const GrpcTlsOptions& etcd_tls,
                                                                      std::chrono::seconds provision_timeout) {
  SINEW_ASSIGN_OR_RETURN(auto client, coord::EtcdClient::Connect(etcd, std::chrono::seconds(5), etcd_tls));
  return std::unique_ptr<SandboxBackend>(new EtcdSandboxBackend(std::move(client), tls, provision_timeout));
}

}  // namespace sinew::harness
