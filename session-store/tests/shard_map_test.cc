// The store shard map (sinew/session_store/shard_map.h): parsing its etcd keys, and the
// session -> shard function: a pure function of the id, stable when a shard is added.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "keys.h"
#include "sinew/session_store/shard_map.h"

namespace sinew::store {
namespace {

const std::string kShards = std::string(kShardPrefix) + "shards/";
const std::string kGenerations = std::string(kShardPrefix) + "generations/";

// A session id made at `ms` with random bits `r` (the store's layout: 6 bytes of time).
std::string IdAt(int64_t ms, uint64_t r) {
  std::string raw(16, '\0');
  for (int i = 0; i < 6; ++i) raw[static_cast<size_t>(i)] = static_cast<char>(ms >> (8 * (5 - i)));
  for (int i = 6; i < 14; ++i) raw[static_cast<size_t>(i)] = static_cast<char>(r >> (8 * (i - 6)));
  return keys::ToHex(raw);
}

std::string Gen(int64_t ms) {
  std::string d = std::to_string(ms);
  return kGenerations + std::string(16 - d.size(), '0') + d;
}

TEST(ShardMapTest, SessionsKeepTheirShardWhenAShardIsAdded) {
  std::map<std::string, std::string> keys = {{kShards + "a", "127.0.0.1:1"}, {Gen(0), "a"}};
  auto one = ShardMap::FromKeys(keys);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const int64_t t0 = 1764600000000;  // sessions made before the second shard joins
  for (uint64_t r = 0; r < 100; ++r) EXPECT_EQ(*one->ShardOf(IdAt(t0, r * 7919)), "a");

  keys[kShards + "b"] = "127.0.0.1:2";
  keys[Gen(t0 + 1000)] = "a,b";
  auto two = ShardMap::FromKeys(keys);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  std::map<std::string, int> after;
  for (uint64_t r = 0; r < 1000; ++r) {
    EXPECT_EQ(*two->ShardOf(IdAt(t0, r * 7919)), "a") << "an old session moved";
    ++after[*two->ShardOf(IdAt(t0 + 1000, r * 7919))];
  }
  ASSERT_EQ(after.size(), 2u);
  EXPECT_GT(after["a"], 400);
  EXPECT_GT(after["b"], 400);
  // Ids older than every generation (a store's sessions from before sharding, imports)
  // belong to the first.
  keys.erase(Gen(0));
  keys[Gen(t0 - 5000)] = "a";
  auto later = ShardMap::FromKeys(keys);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(*later->ShardOf(IdAt(1000, 1)), "a");
  EXPECT_EQ(later->addresses().at("b"), "127.0.0.1:2");
}

TEST(ShardMapTest, BadKeysAreRefusedNamingTheKey) {
  const std::pair<std::map<std::string, std::string>, const char*> bad[] = {
      {{{kShards + "a b", "h:1"}, {Gen(0), "a"}}, "shards/a b"},
      {{{kShards + "a", ""}, {Gen(0), "a"}}, "shards/a"},
      {{{kShards + "a", "h:1"}, {kGenerations + "12x", "a"}}, "start time"},
      {{{kShards + "a", "h:1"}, {Gen(0), "a,a"}}, "distinct"},
      {{{kShards + "a", "h:1"}, {Gen(0), ""}}, "distinct"},
      {{{kShards + "a", "h:1"}, {Gen(0), "a,c"}}, "'c', which has no address"},
  };
  for (const auto& [keys, message] : bad) {
    auto m = ShardMap::FromKeys(keys);
    ASSERT_FALSE(m.ok()) << message;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(message), std::string::npos) << m.status().message();
  }
  auto empty = ShardMap::FromKeys({{"/other/key", "x"}});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->ShardOf(IdAt(1, 1)).status().code(), StatusCode::kFailedPrecondition);
  auto one = ShardMap::FromKeys({{kShards + "a", "h:1"}, {Gen(0), "a"}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ShardOf("not-an-id").status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardMapTest, SessionIdTimeIsTheStoresCreationMs) {
  EXPECT_EQ(*SessionIdTimeMs(IdAt(1764600000123, 42)), 1764600000123);
  const int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t made = *SessionIdTimeMs(keys::NewSessionId());
  EXPECT_GE(made, before);
  EXPECT_LE(made, before + 60000);
}

}  // namespace
}  // namespace sinew::store
