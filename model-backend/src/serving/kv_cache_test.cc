// Sizing the KV cache: the blocks that --gpu-memory-fraction leaves on a
// device after the weights, and the options that bound it.
#include "kv_cache.h"

#include <gtest/gtest.h>

#include "sinew/model/serving.h"
#include "test_util.h"

namespace sinew::model {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

TEST(KvBlocksForDeviceMemory, TheFractionLessWhatIsInUseOverTheBlockSize) {
  // 140 GiB in all, 2 GiB in use by the weights: 0.9 of it leaves 124 GiB.
  const BackendMemory::DeviceMemoryInfo h200{138 * kGiB, 140 * kGiB};
  EXPECT_EQ(KvBlocksForDeviceMemory(h200, 0.9, size_t{1} << 20), (126 * 1024) - 2 * 1024);
  EXPECT_EQ(KvBlocksForDeviceMemory(h200, 1.0, kGiB), 138);
  // Rounds down to whole blocks.
  EXPECT_EQ(KvBlocksForDeviceMemory(h200, 1.0, 3 * kGiB), 46);
  // More in use than the fraction allows (another process, big weights): none.
  const BackendMemory::DeviceMemoryInfo busy{10 * kGiB, 100 * kGiB};
  EXPECT_EQ(KvBlocksForDeviceMemory(busy, 0.5, 1), 0);
  EXPECT_EQ(KvBlocksForDeviceMemory(busy, 0.9, 0), 0);
}

TEST(KvCache, BlockBytesCountEveryLayersKAndVRows) {
  // F16 K rows of 64 values are 128 bytes; Q8_0 V rows, 2 blocks of 34 bytes.
  EXPECT_EQ(KvCache::BlockBytes(3, 16, 64, GgmlType::kF16, GgmlType::kQ8_0),
            size_t{3} * 16 * (128 + 68));
}

TEST(ServingOptionsTest, AGpuMemoryFractionOutsideZeroToOneIsRefused) {
  EngineOptions eo;
  eo.n_threads = 1;
  for (double fraction : {0.0, -0.5, 1.01}) {
    ServingOptions so;
    so.gpu_memory_fraction = fraction;
    auto engine = ServingEngine::Load(testutil::Stories260KPath(), eo, so);
    ASSERT_FALSE(engine.ok()) << fraction;
    EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(engine.status().message().find("gpu_memory_fraction"), std::string::npos);
  }
  ServingOptions negative_swap;
  negative_swap.swap_space_mib = -1;
  EXPECT_EQ(ServingEngine::Load(testutil::Stories260KPath(), eo, negative_swap).status().code(),
            StatusCode::kInvalidArgument);
  // On the CPU the fraction does not size anything: four contexts, as before.
  ServingOptions so;
  so.gpu_memory_fraction = 0.01;
  auto engine = ServingEngine::Load(testutil::Stories260KPath(), eo, so);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const int32_t ctx_blocks = ((*engine)->info().n_ctx + so.block_size - 1) / so.block_size;
  EXPECT_EQ((*engine)->stats().blocks_total, 4 * ctx_blocks);
}

}  // namespace
}  // namespace sinew::model
