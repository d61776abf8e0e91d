// LeasedKey's keeper thread.
#include "sinew/coord/leased_key.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sinew::coord {
namespace {

using Clock = std::chrono::steady_clock;

class LeasedKeyImpl final : public LeasedKey {
 public:
  LeasedKeyImpl(EtcdClient* etcd, std::string key, std::string value, Options options, Lease lease)
      : etcd_(etcd), key_(std::move(key)), options_(options), wanted_(std::move(value)) {
    written_ = wanted_;
    lease_id_ = lease.id;
    thread_ = std::thread([this] { Loop(); });
  }

  ~LeasedKeyImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    Status s = etcd_->RevokeLease(lease_id_.load());
    if (!s.ok()) spdlog::warn("etcd: could not revoke the lease of {}: {}", key_, s.ToString());
  }

  void Set(std::string value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wanted_ = std::move(value);
    }
    cv_.notify_all();
  }
  int64_t lease_id() const override { return lease_id_.load(); }
  uint64_t regrants() const override { return regrants_.load(); }

 private:
  void Loop() {
    const auto renew_every = std::chrono::milliseconds(options_.ttl_seconds * 1000 / 3);
    auto next_renew = Clock::now() + renew_every;
    bool need_lease = false;  // etcd lost the lease: grant anew and write again
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_until(lock, next_renew, [&] { return stopping_ || wanted_ != written_; });
      if (stopping_) break;
      const std::string value = wanted_;
      const bool changed = value != written_;
      const bool renew = Clock::now() >= next_renew;
      lock.unlock();
      Status s = Step(value, changed, renew, &need_lease);
      lock.lock();
      if (s.ok()) {
        written_ = value;
        if (renew) next_renew = Clock::now() + renew_every;
      } else {
        spdlog::warn("etcd: keeping {} alive: {}", key_, s.ToString());
        next_renew = Clock::now() + options_.retry;  // retry soon, value or lease
        cv_.wait_until(lock, next_renew, [&] { return stopping_; });
      }
    }
  }

  // One round without the lock: renew, re-grant when lost, write when changed.
  Status Step(const std::string& value, bool changed, bool renew, bool* need_lease) {
    if (renew && !*need_lease) {
      SINEW_ASSIGN_OR_RETURN(int64_t ttl, etcd_->KeepAliveOnce(lease_id_.load()));
      if (ttl == 0) {
        spdlog::warn("etcd: the lease of {} is gone; granting a new one", key_);
        *need_lease = true;
      }
    }
    if (*need_lease) {
      SINEW_ASSIGN_OR_RETURN(Lease lease, etcd_->GrantLease(options_.ttl_seconds));
      lease_id_ = lease.id;
      ++regrants_;
      *need_lease = false;
      changed = true;
    }
    if (changed) {
      SINEW_RETURN_IF_ERROR(etcd_->Put(key_, value, lease_id_.load()).status());
    }
    return Status::Ok();
  }

  // Constant after construction.
  EtcdClient* const etcd_;
  const std::string key_;
  const Options options_;

  std::atomic<int64_t> lease_id_{0};  // written only by the keeper thread
  std::atomic<uint64_t> regrants_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::string wanted_;     // guarded by mu_
  std::string written_;    // guarded by mu_: what etcd holds (as far as we know)
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<LeasedKey>> LeasedKey::Create(EtcdClient* etcd, std::string key,
                                                     std::string value, Options options) {
  if (options.ttl_seconds < 1) return Status::InvalidArgument("lease TTL must be at least 1 s");
  if (key.empty()) return Status::InvalidArgument("etcd key is empty");
  SINEW_ASSIGN_OR_RETURN(Lease lease, etcd->GrantLease(options.ttl_seconds));
  auto put = etcd->Put(key, value, lease.id);
  if (!put.ok()) {
    (void)etcd->RevokeLease(lease.id);
    return put.status();
  }
  return std::unique_ptr<LeasedKey>(
      new LeasedKeyImpl(etcd, std::move(key), std::move(value), options, lease));
}

}  // namespace sinew::coord
