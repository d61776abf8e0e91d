// PrefixMirror's watch thread: list, watch, resume, re-list.
#include "sinew/coord/prefix_mirror.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sinew::coord {
namespace {

class PrefixMirrorImpl final : public PrefixMirror {
 public:
  PrefixMirrorImpl(EtcdClient* etcd, std::string prefix, ChangeFn on_change, Options options)
      : etcd_(etcd),
        prefix_(std::move(prefix)),
        on_change_(std::move(on_change)),
        options_(options),
        handle_(etcd->NewWatchHandle()) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~PrefixMirrorImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    handle_->Cancel();
    cv_.notify_all();
    thread_.join();
  }

  std::map<std::string, KeyValue> Snapshot() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return contents_;
  }
  bool WaitSynced(std::chrono::milliseconds timeout) const override {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return revision_ > 0; });
  }
  int64_t revision() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return revision_;
  }
  uint64_t resumes() const override { return resumes_.load(); }
  uint64_t relists() const override { return relists_.load(); }

 private:
  void Loop() {
    bool need_list = true;
    auto backoff = options_.retry;
    while (!Stopping()) {
      if (need_list) {
        auto listing = etcd_->GetPrefix(prefix_);
        if (!listing.ok()) {
          spdlog::warn("etcd: listing {}: {}", prefix_, listing.status().ToString());
          Pause(&backoff);
          continue;
        }
        std::map<std::string, KeyValue> fresh;
        for (auto& kv : listing->kvs) fresh[kv.key] = std::move(kv);
        Publish([&](std::map<std::string, KeyValue>& c) { c = std::move(fresh); },
                listing->revision);
        need_list = false;
      }
      const int64_t from = revision() + 1;
      int64_t compacted = 0;
      bool got_events = false;
      Status s = etcd_->Watch(
          prefix_, from, handle_.get(),
          [&](const std::vector<WatchEvent>& events, int64_t header_revision) {
            got_events = true;
            Publish(
                [&](std::map<std::string, KeyValue>& c) {
                  for (const auto& ev : events) {
                    if (ev.deleted) {
                      c.erase(ev.kv.key);
                    } else {
                      c[ev.kv.key] = ev.kv;
                    }
                  }
                },
                std::max(header_revision, events.back().kv.mod_revision));
            return true;
          },
          &compacted);
      if (Stopping()) break;
      if (got_events) backoff = options_.retry;
      if (s.code() == StatusCode::kOutOfRange) {
        spdlog::warn("etcd: {}; listing {} again", s.message(), prefix_);
        ++relists_;
        need_list = true;
        continue;
      }
      spdlog::info("etcd: watch of {} ended ({}); resuming from revision {}", prefix_,
                   s.ok() ? "closed" : s.ToString(), revision() + 1);
      ++resumes_;
      Pause(&backoff);
    }
  }

  template <typename Fn>
  void Publish(Fn&& change, int64_t revision) {
    std::map<std::string, KeyValue> copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      change(contents_);
      revision_ = std::max(revision_, revision);
      if (on_change_) copy = contents_;
    }
    cv_.notify_all();
    if (on_change_) on_change_(copy);
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }
  void Pause(std::chrono::milliseconds* backoff) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, *backoff, [&] { return stopping_; });
    *backoff = std::min(*backoff * 2, std::chrono::milliseconds(2000));
  }

  // Constant after construction.
  EtcdClient* const etcd_;
  const std::string prefix_;
  const ChangeFn on_change_;
  const Options options_;
  const std::unique_ptr<EtcdClient::WatchHandle> handle_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stopping_ = false;                     // guarded by mu_
  std::map<std::string, KeyValue> contents_;  // guarded by mu_
  int64_t revision_ = 0;                      // guarded by mu_
  std::atomic<uint64_t> resumes_{0};
  std::atomic<uint64_t> relists_{0};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<PrefixMirror> PrefixMirror::Start(EtcdClient* etcd, std::string prefix,
                                                  ChangeFn on_change, Options options) {
  return std::make_unique<PrefixMirrorImpl>(etcd, std::move(prefix), std::move(on_change), options);
}

}  // namespace sinew::coord
