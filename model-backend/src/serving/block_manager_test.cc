// BlockManager: free list, reference counts, prefix keys and LRU eviction.
#include "block_manager.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

TEST(BlockManager, AllocatesUntilEmptyAndReusesReleasedBlocks) {
  BlockManager m(3, 4, true);
  auto a = m.Allocate(), b = m.Allocate(), c = m.Allocate();
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(m.Allocate().has_value());
  EXPECT_EQ(m.available(), 0);
  m.Release(*b);
  EXPECT_EQ(m.available(), 1);
  EXPECT_EQ(m.Allocate(), b);
}

TEST(BlockManager, KeyedBlocksAreSharedCachedAndEvictedLeastRecentFirst) {
  BlockManager m(2, 2, true);
  const std::vector<int32_t> t1 = {5, 6}, t2 = {7, 8};
  const uint64_t h1 = BlockManager::ChainHash(0, t1);
  const uint64_t h2 = BlockManager::ChainHash(h1, t2);
  EXPECT_NE(h1, BlockManager::ChainHash(0, t2));
  EXPECT_NE(h2, BlockManager::ChainHash(0, t2));  // the prefix is part of the key
  auto a = m.Allocate(), b = m.Allocate();
  m.Register(*a, h1, t1);
  m.Register(*b, h2, t2);
  EXPECT_EQ(m.Lookup(h1, t1), a);  // shared: two references
  m.Release(*a);
  m.Release(*a);  // now cached, evictable
  m.Release(*b);
  EXPECT_EQ(m.available(), 2);
  EXPECT_EQ(m.Lookup(h2, t2), b);  // back out of the LRU
  EXPECT_EQ(m.Allocate(), a);      // evicts the only cached one
  EXPECT_FALSE(m.Lookup(h1, t1).has_value());
  EXPECT_FALSE(m.Lookup(h2, std::vector<int32_t>{7, 9}).has_value());  // tokens guard
}

TEST(BlockManager, PrefixCacheOffNeverMatches) {
  BlockManager m(1, 2, false);
  const std::vector<int32_t> t = {1, 2};
  auto a = m.Allocate();
  m.Register(*a, 42, t);
  m.Release(*a);
  EXPECT_FALSE(m.Lookup(42, t).has_value());
  EXPECT_EQ(m.available(), 1);
}

}  // namespace
}  // namespace sinew::model
