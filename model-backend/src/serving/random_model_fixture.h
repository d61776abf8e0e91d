// A test fixture for the serving tests: a random-weight model of the parameter's weight
// type, written to a temporary file for each test, and ServingEngines loaded over it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "random_model.h"
#include "serving_test_device.h"
#include "sinew/model/serving.h"

namespace sinew::model {

// The engine's stats once `blocks` KV blocks are available again. With step
// overlap a sequence's blocks are freed when the step after its last one is
// taken in, which may come just after its Generate returned: this waits for
// that (the scheduler takes it in at once), failing the test after 30 s.
inline ServingStats StatsOnceFree(const ServingEngine& engine, int32_t blocks) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ServingStats stats = engine.stats();
  while (stats.blocks_available != blocks && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stats = engine.stats();
  }
  EXPECT_EQ(stats.blocks_available, blocks) << "blocks still held after 30 s";
  return stats;
}

class RandomServingModelTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  // `file_prefix` keeps the files of different suites apart.
  RandomServingModelTest(int32_t n_vocab, uint64_t seed, std::string file_prefix)
      : n_vocab_(n_vocab), seed_(seed), file_prefix_(std::move(file_prefix)) {}

  // The model's spec: a small llama of the parameter's weight type.
  testing::RandomModelSpec Spec() const {
    testing::RandomModelSpec spec;
    spec.n_vocab = n_vocab_;
    spec.n_embd = 128;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_ctx = 256;
    spec.weight_type = GetParam();
    spec.seed = seed_;
    return spec;
  }

  void SetUp() override {
    SKIP_WITHOUT_TEST_DEVICE();
    const testing::RandomModelSpec spec = Spec();
    path_ = (std::filesystem::temp_directory_path() /
             (file_prefix_ + std::to_string(static_cast<int>(GetParam())) + "_" + std::to_string(::getpid()) +
              ".gguf"))
                .string();
    ASSERT_TRUE(testing::WriteRandomModel(spec, path_).ok());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // The engine over the model with 2 threads; null (and a test failure) if it fails.
  std::unique_ptr<ServingEngine> Load(const ServingOptions& options) {
    EngineOptions eo = testing::ServingTestEngineOptions(2);
    auto engine = ServingEngine::Load(path_, eo, testing::ServingTestOptions(options));
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  std::string path_;

 private:
  int32_t n_vocab_;
  uint64_t seed_;
  std::string file_prefix_;
};

}  // namespace sinew::model
