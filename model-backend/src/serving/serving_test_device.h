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

}  // namespace sinew::model::testing
