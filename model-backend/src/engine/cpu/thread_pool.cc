#include "cpu/thread_pool.h"

#include <algorithm>

namespace sinew::model::cpu {
namespace {
// Spin iterations (each a sched_yield, so an oversubscribed machine still makes
// progress) before sleeping.
constexpr int kSpinIterations = 200;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) return;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < kSpinIterations; ++spin) {
      if (generation_.load(std::memory_order_acquire) != seen || stop_.load()) break;
      std::this_thread::yield();
    }
    if (generation_.load(std::memory_order_acquire) == seen && !stop_.load()) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stop_.load() || generation_.load(std::memory_order_acquire) != seen;
      });
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    RunChunks();
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances load without much claiming traffic.
  chunk_ = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
  fn_ = &fn;
  n_ = n;
  next_.store(0, std::memory_order_relaxed);
  active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // publishes the fields above
  {
    std::lock_guard<std::mutex> lock(mutex_);
  }
  wake_.notify_all();
  RunChunks();
  for (int spin = 0; spin < kSpinIterations; ++spin) {
    if (active_.load(std::memory_order_acquire) == 0) return;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return active_.load(std::memory_order_acquire) == 0; });
}

}  // namespace sinew::model::cpu
