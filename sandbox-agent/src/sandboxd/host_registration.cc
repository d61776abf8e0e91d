// HostRegistration: the record, and the thread that keeps it current in etcd.
#include "sandboxd/host_registration.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include "sandboxd/sandbox_manager_impl.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/coord/leased_key.h"

namespace sinew::sandbox {
namespace {

uint64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit) {
    if (name == "MemTotal:") return kb * 1024;
  }
  return 0;
}

std::string RandomInstance() {
  unsigned char b[8];
  if (RAND_bytes(b, sizeof b) != 1) return std::to_string(::getpid());
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

class HostRegistrationImpl final : public HostRegistration {
 public:
  HostRegistrationImpl(SandboxManager* manager, const ProvisionerConfig& config,
                       HostRegistrationOptions options, std::unique_ptr<coord::EtcdClient> etcd,
                       std::unique_ptr<coord::LeasedKey> key, v1::SandboxHostRecord published)
      : manager_(manager),
        config_(config),
        options_(std::move(options)),
        etcd_(std::move(etcd)),
        key_(std::move(key)),
        published_(std::move(published)) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~HostRegistrationImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    key_.reset();  // revokes the lease: the host leaves the set now
  }

 private:
  void Loop() {
    auto last_write = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, options_.poll, [&] { return stopping_; })) {
      lock.unlock();
      const int64_t at = NowUnixMs();  // before reading: the record shows everything done by then
      v1::SandboxHostRecord now = BuildHostRecord(*manager_, config_, options_);
      now.set_started_unix_ms(published_.started_unix_ms());
      now.set_instance(published_.instance());
      v1::SandboxHostRecord old = published_;
      old.clear_updated_unix_ms();
      const bool changed = now.SerializeAsString() != old.SerializeAsString();
      if (changed || std::chrono::steady_clock::now() - last_write >= options_.refresh) {
        now.set_updated_unix_ms(at);
        key_->Set(now.SerializeAsString());
        published_ = now;
        last_write = std::chrono::steady_clock::now();
      }
      lock.lock();
    }
  }

  // Constant after construction.
  SandboxManager* const manager_;
  const ProvisionerConfig config_;
  const HostRegistrationOptions options_;
  const std::unique_ptr<coord::EtcdClient> etcd_;

  std::unique_ptr<coord::LeasedKey> key_;  // reset only in the destructor, after the thread
  v1::SandboxHostRecord published_;        // used by the thread only
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

v1::SandboxHostRecord BuildHostRecord(SandboxManager& manager, const ProvisionerConfig& config,
                                      const HostRegistrationOptions& options) {
  v1::SandboxHostRecord r;
  r.set_host_id(options.host_id);
  r.set_address(options.advertise);
  r.set_memory_capacity_bytes(options.memory_capacity_bytes != 0 ? options.memory_capacity_bytes
                                                                 : MemTotalBytes());
  uint32_t cpus = static_cast<uint32_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  r.set_cpu_capacity_millicores(
      options.cpu_capacity_millicores != 0 ? options.cpu_capacity_millicores : cpus * 1000);
  r.set_max_sandboxes(config.max_sandboxes);
  auto defaults = NormalizeResources(v1::Resources(), config.defaults);
  if (defaults.ok()) *r.mutable_defaults() = *defaults;
  for (auto& shape : manager.Occupancy()) {
    const uint32_t n = shape.running();  // warm sandboxes wait to be handed over: not reserved
    r.set_memory_reserved_bytes(r.memory_reserved_bytes() +
                                n * shape.resources().memory_guaranteed_bytes());
    r.set_cpu_reserved_millicores(r.cpu_reserved_millicores() +
                                  n * shape.resources().cpu_millicores());
    r.set_running(r.running() + shape.running());
    r.set_warm(r.warm() + shape.warm());
    *r.add_shapes() = std::move(shape);
  }
  return r;
}

Result<std::unique_ptr<HostRegistration>> HostRegistration::Start(SandboxManager* manager,
                                                                  const ProvisionerConfig& config,
                                                                  HostRegistrationOptions options) {
  static const std::regex kHostId("[A-Za-z0-9._-]{1,64}");
  if (!std::regex_match(options.host_id, kHostId)) {
    return Status::InvalidArgument("--host-id '" + options.host_id +
                                   "' must match [A-Za-z0-9._-]{1,64}");
  }
  if (options.advertise.empty() || options.advertise.find(':') == std::string::npos) {
    return Status::InvalidArgument("--advertise must be the host:port harnesses dial (got '" +
                                   options.advertise + "')");
  }
  if (options.ttl_seconds < 1) return Status::InvalidArgument("--etcd-ttl must be at least 1 s");
  SINEW_ASSIGN_OR_RETURN(auto etcd, coord::EtcdClient::Connect(options.etcd, std::chrono::seconds(5), options.etcd_tls));
  v1::SandboxHostRecord record = BuildHostRecord(*manager, config, options);
  record.set_instance(RandomInstance());
  record.set_started_unix_ms(NowUnixMs());
  record.set_updated_unix_ms(record.started_unix_ms());
  const std::string key = std::string(kSandboxHostsPrefix) + options.host_id;
  SINEW_ASSIGN_OR_RETURN(auto leased,
                         coord::LeasedKey::Create(etcd.get(), key, record.SerializeAsString(),
                                                  {.ttl_seconds = options.ttl_seconds}));
  spdlog::info("sinew-sandboxd: registered as {} ({}) in etcd {} with a {} s lease",
               options.host_id, options.advertise, options.etcd, options.ttl_seconds);
  return std::unique_ptr<HostRegistration>(new HostRegistrationImpl(
      manager, config, std::move(options), std::move(etcd), std::move(leased), std::move(record)));
}

}  // namespace sinew::sandbox
