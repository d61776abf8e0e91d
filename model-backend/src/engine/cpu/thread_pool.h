// ThreadPool: a fixed set of worker threads that run one parallel loop at a time.
//
// ParallelFor splits [0, n) into chunks that the workers and the calling thread
// claim; it returns when every chunk is done. Between loops workers spin for a
// short while (a token's forward pass issues a loop every few microseconds),
// then sleep on a condition variable.
//
// Thread-safety: ParallelFor must not be called concurrently or re-entrantly;
// the owner (the CPU backend) runs one op at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include <atomic>

namespace sinew::model::cpu {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over chunks of [0, n) of at least `grain` items.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunChunks();

  const int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;  // pairs with the condition variables only
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};  // bumped to start a loop
  std::atomic<int> active_{0};           // workers still in the current loop
  std::atomic<bool> stop_{false};

  // The current loop (set before generation_ is bumped).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace sinew::model::cpu
