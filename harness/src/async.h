// The agent loop's asynchronous plumbing (Boost.Asio, C++20 coroutines; docs/harness.md
// "How sessions are driven"). A driven session is a coroutine on the harness's driver
// io_context: while it waits (a model's answer, a timer) it holds no thread, only its
// coroutine frame and its in-memory log. A call that can only block (a store RPC, a
// sandbox call, a model server over HTTP) runs on a thread pool through OnPool, and the
// coroutine resumes on its own executor when it returns.
//
// Log context: ScopedLogContext is per thread, and a coroutine resumes on any of the
// io_context's threads, so every wait here carries the coroutine's fields across it: the
// pool thread runs the call under them (traceparent, session field), and the coroutine's
// thread gets them back when it resumes (ReplaceLogFields).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "sinew/trace.h"

namespace sinew::harness {

namespace asio = boost::asio;

template <typename T>
using Task = asio::awaitable<T>;

// Callbacks of AwaitCallback and WaitForCallback that are inside asio::post right now. A
// foreign thread (gRPC's, libcurl's) that posts a coroutine's wake-up still touches the
// io_context for a moment after the coroutine may already have run to its end; whoever
// destroys the io_context first waits for this to drop to zero (WaitForForeignPosts).
inline std::atomic<int>& ForeignPostsInFlight() {
  static std::atomic<int> count{0};
  return count;
}
inline void WaitForForeignPosts() {
  while (ForeignPostsInFlight().load() > 0) std::this_thread::yield();
}

// Runs `fn()` (a call that blocks) on `pool` under the calling coroutine's log fields and
// resumes the coroutine on its own executor with the result (an exception fn throws is
// thrown there). The caller's frame outlives the call, so fn may capture by reference.
template <typename Fn>
Task<std::invoke_result_t<Fn&>> OnPool(asio::thread_pool& pool, Fn fn) {
  using T = std::invoke_result_t<Fn&>;
  LogFields fields = CurrentLogFields();
  std::optional<T> out;
  std::exception_ptr error;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        asio::post(pool, [&, handler = std::move(handler)]() mutable {
          {
            ScopedLogContext context(fields);
            try {
              out.emplace(fn());
            } catch (...) {
              error = std::current_exception();
            }
          }
          const auto executor = asio::get_associated_executor(handler);
          asio::post(executor, std::move(handler));
        });
      },
      asio::use_awaitable);
  ReplaceLogFields(std::move(fields));
  if (error) std::rethrow_exception(error);
  co_return std::move(*out);
}

// Starts an asynchronous call with `start(done)` and waits, without holding a thread,
// until it calls `done(value)` (once; from any thread, also before start returns); the
// coroutine then resumes on its own executor with the value.
template <typename T, typename Start>
Task<T> AwaitCallback(Start start) {
  LogFields fields = CurrentLogFields();
  std::optional<T> out;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        // std::function needs a copyable callable; the handler moves only.
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        start(std::function<void(T)>([&out, shared](T value) {
          ++ForeignPostsInFlight();
          out.emplace(std::move(value));
          const auto executor = asio::get_associated_executor(*shared);
          asio::post(executor, std::move(*shared));
          --ForeignPostsInFlight();
        }));
      },
      asio::use_awaitable);
  ReplaceLogFields(std::move(fields));
  co_return std::move(*out);
}

// Waits `duration` without holding a thread.
inline Task<void> SleepFor(std::chrono::steady_clock::duration duration) {
  LogFields fields = CurrentLogFields();
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(asio::use_awaitable);
  ReplaceLogFields(std::move(fields));
}

// Waits until `arm(done)` has `done(value)` called (from any thread, also before arm
// returns) or `timeout` passes: the value, or nullopt on timeout. A call after the
// timeout is harmless. Must run on a strand (or a one-thread executor): that orders the
// call after the wait began.
template <typename T, typename Arm>
Task<std::optional<T>> WaitForCallback(Arm arm, std::chrono::steady_clock::duration timeout) {
  LogFields fields = CurrentLogFields();
  const auto executor = co_await asio::this_coro::executor;
  struct State {
    explicit State(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    std::optional<T> value;
  };
  auto state = std::make_shared<State>(executor);
  state->timer.expires_after(timeout);
  arm(std::function<void(T)>([state, executor](T value) {
    ++ForeignPostsInFlight();
    asio::post(executor, [state, value = std::move(value)]() mutable {
      if (state->value) return;
      state->value = std::move(value);
      state->timer.cancel();
    });
    --ForeignPostsInFlight();
  }));
  boost::system::error_code ignored;
  co_await state->timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  ReplaceLogFields(std::move(fields));
  co_return std::move(state->value);
}

}  // namespace sinew::harness
