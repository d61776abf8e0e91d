// KvSwapSpace on the CPU backend's memory: blocks copied out and back keep
// every byte of every layer, a swap space without room takes nothing, and one
// too small for a block is refused.
#include "kv_swap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kv_cache.h"

namespace sinew::model {
namespace {

constexpr int32_t kLayers = 3, kBlocks = 6, kBlockSize = 4;
constexpr int64_t kKvDim = 64;

// Block `block` of every layer, K and V, as bytes.
std::vector<uint8_t> BlockBytes(const KvCache& kv, int32_t block) {
  std::vector<uint8_t> out;
  for (int32_t l = 0; l < kLayers; ++l) {
    for (const Tensor& t : {kv.k(l), kv.v(l)}) {
      const uint8_t* p = t.row(int64_t{block} * kBlockSize);
      out.insert(out.end(), p, p + t.row_bytes() * kBlockSize);
    }
  }
  return out;
}

class KvSwapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateCpuBackend(CpuBackendOptions{});
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
    // K and V of different types, so their rows differ in size.
    auto kv = KvCache::Create(*backend_, kLayers, kBlocks, kBlockSize, kKvDim, GgmlType::kF16,
                              GgmlType::kQ8_0);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(kv).value();
    // A different byte everywhere in the cache.
    uint32_t state = 7;
    for (int32_t l = 0; l < kLayers; ++l) {
      for (const Tensor& t : {kv_->k(l), kv_->v(l)}) {
        uint8_t* p = t.row(0);
        for (int64_t i = 0; i < t.row_bytes() * kBlocks * kBlockSize; ++i) {
          state = state * 1664525u + 1013904223u;
          p[i] = static_cast<uint8_t>(state >> 24);
        }
      }
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCache> kv_;
};

TEST_F(KvSwapTest, BlocksComeBackByteForByteIntoOtherBlocks) {
  auto space = KvSwapSpace::Create(*backend_, *kv_, kv_->block_bytes() * 4);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  KvSwapSpace& swap = **space;
  EXPECT_EQ(swap.n_slots(), 4);
  const std::vector<int32_t> out_blocks = {4, 1, 2};
  std::vector<std::vector<uint8_t>> before;
  for (int32_t b : out_blocks) before.push_back(BlockBytes(*kv_, b));
  std::vector<int32_t> slots;
  ASSERT_TRUE(swap.SwapOut(*kv_, out_blocks, slots).ok());
  EXPECT_EQ(slots.size(), 3u);
  EXPECT_EQ(swap.available(), 1);
  // The cache reuses the blocks meanwhile; the copies come back elsewhere.
  for (int32_t l = 0; l < kLayers; ++l) {
    for (const Tensor& t : {kv_->k(l), kv_->v(l)}) {
      std::memset(t.row(0), 0, static_cast<size_t>(t.row_bytes() * kBlocks * kBlockSize));
    }
  }
  const std::vector<int32_t> in_blocks = {0, 5, 3};
  ASSERT_TRUE(swap.SwapIn(*kv_, slots, in_blocks).ok());
  for (size_t i = 0; i < in_blocks.size(); ++i) {
    EXPECT_EQ(BlockBytes(*kv_, in_blocks[i]), before[i]) << "block " << out_blocks[i];
  }
  swap.Release(slots);
  EXPECT_TRUE(slots.empty());
  EXPECT_EQ(swap.available(), 4);
}

TEST_F(KvSwapTest, WithoutRoomNothingIsTakenAndTooSmallASpaceIsRefused) {
  auto space = KvSwapSpace::Create(*backend_, *kv_, kv_->block_bytes() * 2 + 5);
  ASSERT_TRUE(space.ok());
  EXPECT_EQ((*space)->n_slots(), 2);
  std::vector<int32_t> slots = {99};  // what the caller had stays
  const Status full = (*space)->SwapOut(*kv_, std::vector<int32_t>{0, 1, 2}, slots);
  EXPECT_EQ(full.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(slots, std::vector<int32_t>{99});
  EXPECT_EQ((*space)->available(), 2);

  auto tiny = KvSwapSpace::Create(*backend_, *kv_, kv_->block_bytes() - 1);
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("no KV block"), std::string::npos)
      << tiny.status().ToString();
}

}  // namespace
}  // namespace sinew::model
