// EventWatcher of the embedded store: reads past events in pages, then waits on the
// session's condition variable, which every append notifies (no polling); OnReady
// registers a callback with the session that the next append calls.
#include <atomic>
#include <deque>
#include <functional>

#include "keys.h"
#include "rocks_store.h"

namespace sinew::store {
namespace {

constexpr uint32_t kPage = 256;

class LocalWatcher final : public EventWatcher {
 public:
  LocalWatcher(RocksStore* store, std::string id, std::string raw, uint64_t from)
      : store_(store), id_(std::move(id)), raw_(std::move(raw)), next_(from) {}
  ~LocalWatcher() override {
    std::unique_lock<std::mutex> lock;
    auto state = store_->LoadedState(raw_, &lock);
    if (state.ok()) (*state)->ready.erase(this);
  }

  Result<bool> Next(v1::Event* out, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (cancelled_.load()) return Status::Cancelled("watch of " + id_ + " was cancelled");
      if (!buffer_.empty()) {
        *out = std::move(buffer_.front());
        buffer_.pop_front();
        return true;
      }
      v1::GetEventsRequest req;
      req.set_session_id(id_);
      req.set_from_seq(next_);
      req.set_limit(kPage);
      SINEW_ASSIGN_OR_RETURN(auto page, store_->GetEvents(req));
      if (page.events_size() > 0) {
        for (auto& ev : *page.mutable_events()) buffer_.push_back(std::move(ev));
        next_ = buffer_.back().seq() + 1;
        continue;
      }
      std::unique_lock<std::mutex> lock;
      SINEW_ASSIGN_OR_RETURN(auto state, store_->LoadedState(raw_, &lock));
      bool woke = state->cv.wait_until(lock, deadline, [&] {
        return cancelled_.load() || state->meta.next_seq() > next_;
      });
      if (!woke) return false;
    }
  }

  void Cancel() override {
    cancelled_.store(true);
    std::unique_lock<std::mutex> lock;
    auto state = store_->LoadedState(raw_, &lock);
    if (!state.ok()) return;
    (*state)->cv.notify_all();
    auto it = (*state)->ready.find(this);
    if (it == (*state)->ready.end()) return;
    auto ready = std::move(it->second);
    (*state)->ready.erase(it);
    lock.unlock();
    ready();
  }

  void OnReady(std::function<void()> ready) override {
    if (cancelled_.load() || !buffer_.empty()) return ready();
    std::unique_lock<std::mutex> lock;
    auto state = store_->LoadedState(raw_, &lock);
    // An error (the store closing) is Next's to report: it returns at once.
    // cancelled_ again under the lock: a Cancel that took it first has set it.
    if (!state.ok() || (*state)->meta.next_seq() > next_ || cancelled_.load()) {
      if (lock.owns_lock()) lock.unlock();
      return ready();
    }
    (*state)->ready[this] = std::move(ready);
  }

 private:
  RocksStore* const store_;  // not owned; outlives the watcher
  const std::string id_;
  const std::string raw_;
  uint64_t next_;
  std::deque<v1::Event> buffer_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

Result<std::unique_ptr<EventWatcher>> RocksStore::Watch(const std::string& session_id,
                                                        uint64_t from_seq) {
  SINEW_ASSIGN_OR_RETURN(std::string raw, keys::ParseSessionId(session_id));
  {
    std::unique_lock<std::mutex> lock;
    SINEW_RETURN_IF_ERROR(LoadedState(raw, &lock).status());
  }
  return std::unique_ptr<EventWatcher>(
      new LocalWatcher(this, session_id, std::move(raw), from_seq == 0 ? 1 : from_seq));
}

}  // namespace sinew::store
