// The device the serving tests run on: the CPU, or CUDA in their build for the
// GPU (sinew_model_cuda_serving_test, label gpu: SINEW_SERVING_TEST_CUDA),
// where the tests that load a model are skipped, with the reason, when there
// is no GPU (the pure unit tests beside them run anyway).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

#include "sinew/model/backend.h"
#include "sinew/model/engine.h"
#include "sinew/model/serving.h"

namespace sinew::model::testing {

#ifdef SINEW_SERVING_TEST_CUDA
inline constexpr const char* kServingTestDevice = "cuda";
#else
inline constexpr const char* kServingTestDevice = "cpu";
#endif

// Skips the test, with the reason, when the test device is CUDA and there is
// no GPU (or no CUDA in the build). A macro: GTEST_SKIP returns from the test.
#define SKIP_WITHOUT_TEST_DEVICE()                                                           \
  do {                                                                                       \
    if (std::string_view(::sinew::model::testing::kServingTestDevice) == "cuda") {           \
      auto probe = ::sinew::model::CreateCudaBackend(::sinew::model::CudaBackendOptions{0}); \
      if (!probe.ok()) GTEST_SKIP() << "no GPU: " << probe.status().ToString();              \
    }                                                                                        \
  } while (0)

// Engine options for the serving tests: `n_threads` CPU threads, on the test device.
inline EngineOptions ServingTestEngineOptions(int32_t n_threads) {
  EngineOptions options;
  options.n_threads = n_threads;
  options.device = kServingTestDevice;
  return options;
}

// Serving options for the tests, which often hold several engines at once. On a
// GPU the default pool (n_blocks 0) takes what gpu_memory_fraction leaves of
// the whole device, so a second engine in the process would find no room:
// there each engine without its own n_blocks gets 4096 blocks (65,536
// positions at the default block size), more than any test model's context.
// On the CPU the options are unchanged.
inline ServingOptions ServingTestOptions(ServingOptions options = {}) {
  if (std::string_view(kServingTestDevice) == "cuda" && options.n_blocks == 0) {
    options.n_blocks = 4096;
  }
  return options;
}

}  // namespace sinew::model::testing
