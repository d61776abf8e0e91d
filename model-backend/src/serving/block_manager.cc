#include "block_manager.h"

#include <algorithm>

namespace sinew::model {

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache)
    : block_size_(block_size), prefix_cache_(prefix_cache), blocks_(static_cast<size_t>(n_blocks)) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockManager::Allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    lru_.pop_front();
    Block& evicted = blocks_[static_cast<size_t>(id)];
    by_hash_.erase(evicted.hash);
    evicted.keyed = false;
    evicted.tokens.clear();
  } else {
    return std::nullopt;
  }
  blocks_[static_cast<size_t>(id)].refs = 1;
  return id;
}

void BlockManager::Release(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  if (--block.refs > 0) return;
  if (block.keyed) {
    block.lru_pos = lru_.insert(lru_.end(), id);
  } else {
    free_.push_back(id);
  }
}

uint64_t BlockManager::ChainHash(uint64_t previous, std::span<const int32_t> tokens) {
  // 64-bit FNV-1a over the previous hash and the token ids, then a final mix.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(previous);
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

std::optional<int32_t> BlockManager::Lookup(uint64_t hash, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return std::nullopt;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  Block& block = blocks_[static_cast<size_t>(it->second)];
  // The chained hash covers the whole prefix; the tokens guard this block's part.
  if (!std::equal(tokens.begin(), tokens.end(), block.tokens.begin(), block.tokens.end())) {
    return std::nullopt;
  }
  if (block.refs == 0) lru_.erase(block.lru_pos);
  ++block.refs;
  return it->second;
}

void BlockManager::Register(int32_t id, uint64_t hash, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return;
  Block& block = blocks_[static_cast<size_t>(id)];
  if (block.keyed || by_hash_.contains(hash)) return;
  block.keyed = true;
  block.hash = hash;
  block.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, id);
}

bool BlockManager::Ensure(BlockTable& table, int32_t n_positions) {
  while (static_cast<int32_t>(table.blocks.size()) * block_size_ < n_positions) {
    std::optional<int32_t> block = Allocate();
    if (!block) return false;
    table.blocks.push_back(*block);
  }
  return true;
}

int32_t BlockManager::MatchPrefix(std::span<const int32_t> tokens, int32_t max_blocks,
                                  BlockTable& table) {
  uint64_t hash = 0;
  for (int32_t i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> part = tokens.subspan(static_cast<size_t>(i) * block_size_,
                                                   static_cast<size_t>(block_size_));
    const uint64_t h = ChainHash(hash, part);
    std::optional<int32_t> block = Lookup(h, part);
    if (!block) break;
    table.blocks.push_back(*block);
    hash = h;
  }
  table.n_keyed = static_cast<int32_t>(table.blocks.size());
  table.last_hash = hash;
  return table.n_keyed * block_size_;
}

void BlockManager::RegisterFull(std::span<const int32_t> tokens, int32_t n_computed,
                                BlockTable& table) {
  while ((table.n_keyed + 1) * block_size_ <= n_computed) {
    std::span<const int32_t> part = tokens.subspan(static_cast<size_t>(table.n_keyed) * block_size_,
                                                   static_cast<size_t>(block_size_));
    table.last_hash = ChainHash(table.last_hash, part);
    Register(table.blocks[static_cast<size_t>(table.n_keyed)], table.last_hash, part);
    ++table.n_keyed;
  }
}

void BlockManager::ReleaseAll(BlockTable& table) {
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) Release(*it);
  table.blocks.clear();
  table.n_keyed = 0;
  table.last_hash = 0;
}

}  // namespace sinew::model
