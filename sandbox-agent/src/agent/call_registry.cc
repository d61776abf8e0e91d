#include "agent/call_registry.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace sinew::sandbox {
namespace {

constexpr size_t kForgottenKept = 65536;
constexpr size_t kPreCancelledKept = 1024;
// Live output buffered for attached callers, per call; beyond it chunks are dropped (the
// result still carries the capped output).
constexpr size_t kMaxBufferedBytes = 8u << 20;
constexpr auto kCallerPoll = std::chrono::milliseconds(50);

}  // namespace

struct CallRegistry::Call {
  std::string id;
  std::string name;
  std::string input;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                                   // guarded by mu
  v1::ExecuteResult result;                            // guarded by mu; set once done
  std::deque<std::pair<bool, std::string>> chunks;     // guarded by mu; for the streamer
  size_t buffered = 0;                                 // guarded by mu
  int streamers = 0;                                   // callers with a sink; guarded by mu
  std::atomic<bool> cancelled{false};                  // CallRegistry::Cancel
};

size_t CallRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

void CallRegistry::Start(const std::shared_ptr<Call>& call) {
  // The call belongs to the registry, not to the caller: it runs to completion.
  std::thread([this, call] {
    RunContext run;
    run.cancelled = [call] { return call->cancelled.load(); };
    run.sink = [call](bool is_stderr, std::string_view bytes) {
      std::lock_guard<std::mutex> lock(call->mu);
      if (call->streamers == 0 || call->buffered + bytes.size() > kMaxBufferedBytes) return;
      call->buffered += bytes.size();
      call->chunks.emplace_back(is_stderr, std::string(bytes));
      call->cv.notify_all();
    };
    v1::ExecuteResult result = tools_.Execute(call->name, call->input, run);
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->result = std::move(result);
      call->done = true;
    }
    call->cv.notify_all();
    std::lock_guard<std::mutex> lock(mu_);
    Evict();
  }).detach();
}

bool CallRegistry::Cancel(const std::string& call_id) {
  std::shared_ptr<Call> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(call_id);
    if (it == calls_.end()) {
      if (forgotten_.count(call_id) || !pre_cancelled_.insert(call_id).second) return false;
      pre_cancelled_order_.push_back(call_id);
      while (pre_cancelled_order_.size() > kPreCancelledKept) {
        pre_cancelled_.erase(pre_cancelled_order_.front());
        pre_cancelled_order_.pop_front();
      }
      return false;
    }
    call = it->second;
  }
  std::lock_guard<std::mutex> lock(call->mu);
  if (call->done) return false;
  call->cancelled = true;
  return true;
}

void CallRegistry::Evict() {
  while (calls_.size() > max_kept_ && !order_.empty()) {
    // Forget the oldest finished call; running ones are never forgotten.
    bool evicted = false;
    for (auto it = order_.begin(); it != order_.end(); ++it) {
      auto found = calls_.find(*it);
      if (found == calls_.end()) {
        order_.erase(it);
        evicted = true;
        break;
      }
      std::lock_guard<std::mutex> lock(found->second->mu);
      if (!found->second->done) continue;
      forgotten_.insert(*it);
      forgotten_order_.push_back(*it);
      calls_.erase(found);
      order_.erase(it);
      evicted = true;
      break;
    }
    if (!evicted) break;
  }
  while (forgotten_order_.size() > kForgottenKept) {
    forgotten_.erase(forgotten_order_.front());
    forgotten_order_.pop_front();
  }
}

Result<v1::ExecuteResult> CallRegistry::Run(const std::string& call_id, std::string_view name,
                                            std::string_view input_json, const ChunkSink& sink,
                                            const std::function<bool()>& caller_gone) {
  std::shared_ptr<Call> call;
  bool started_here = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (forgotten_.count(call_id)) {
      return Status::NotFound("the result of call '" + call_id +
                              "' is no longer kept by this sandbox; it will not run again");
    }
    auto it = calls_.find(call_id);
    if (it != calls_.end()) {
      call = it->second;
      if (call->name != name || call->input != input_json) {
        return Status::InvalidArgument("call id '" + call_id +
                                       "' was already used for another tool call in this sandbox");
      }
    } else {
      call = std::make_shared<Call>();
      call->id = call_id;
      call->name = std::string(name);
      call->input = std::string(input_json);
      call->cancelled = pre_cancelled_.erase(call_id) > 0;
      calls_[call_id] = call;
      order_.push_back(call_id);
      started_here = true;
    }
  }
  std::unique_lock<std::mutex> lock(call->mu);
  if (sink) ++call->streamers;
  if (started_here) {
    lock.unlock();
    Start(call);
    lock.lock();
  }
  for (;;) {
    while (sink && !call->chunks.empty()) {
      auto chunk = std::move(call->chunks.front());
      call->chunks.pop_front();
      call->buffered -= chunk.second.size();
      lock.unlock();
      sink(chunk.first, chunk.second);
      lock.lock();
    }
    if (call->done && (!sink || call->chunks.empty())) break;
    if (caller_gone && caller_gone()) {
      if (sink) --call->streamers;
      return Status::Cancelled("the caller left; call '" + call_id + "' carries on");
    }
    call->cv.wait_for(lock, kCallerPoll);
  }
  if (sink) --call->streamers;
  v1::ExecuteResult result = call->result;
  result.set_replayed(!started_here);
  return result;
}

}  // namespace sinew::sandbox
