// BlockManager: the bookkeeping of a paged KV cache. The cache is cut into
// n_blocks fixed-size blocks of block_size positions; a sequence owns a block
// table (block ids in position order). Blocks are reference counted so that
// sequences with the same token prefix share them.
//
// Automatic prefix caching: a full block is keyed by a hash of its whole token
// prefix (chained: the hash of the previous block and this block's tokens).
// When its last user releases it, a keyed block stays in the cache (LRU) and is
// reused by the next sequence with the same prefix; Allocate() takes never-keyed
// free blocks first, then evicts the least recently used cached block.
//
// Thread-safety: none; the serving scheduler owns it on its thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace sinew::model {

// One sequence's blocks in one cache, in position order, and how far they are
// keyed for the prefix cache.
struct BlockTable {
  std::vector<int32_t> blocks;
  int32_t n_keyed = 0;     // leading blocks registered with the prefix cache
  uint64_t last_hash = 0;  // chained hash of block n_keyed - 1
};

class BlockManager {
 public:
  BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks an Allocate() can hand out now (free plus evictable cached ones).
  int32_t available() const {
    return static_cast<int32_t>(free_.size() + lru_.size());
  }

  // A block with reference count 1, or nullopt when none is available.
  std::optional<int32_t> Allocate();
  // Drops one reference; at zero the block is cached (if keyed) or freed.
  void Release(int32_t block);

  // The hash that block index `i` of a sequence gets from the previous block's
  // hash (0 for the first) and its block_size tokens.
  static uint64_t ChainHash(uint64_t previous, std::span<const int32_t> tokens);

  // Looks up the cached block for `hash` whose tokens are `tokens`; on a hit it
  // gains a reference (leaving the LRU if it sat there). nullopt when prefix
  // caching is off or on a miss.
  std::optional<int32_t> Lookup(uint64_t hash, std::span<const int32_t> tokens);
  // Keys a full block that `block`'s owner has just computed. Does nothing if
  // prefix caching is off or another block already holds the key.
  void Register(int32_t block, uint64_t hash, std::span<const int32_t> tokens);

  // What a sequence's table does with the methods above.
  // Grows `table` to cover n_positions; false (with what it got kept) when the
  // cache has no block left.
  bool Ensure(BlockTable& table, int32_t n_positions);
  // Fills the empty `table` with the cached blocks of the longest prefix of
  // `tokens` of at most max_blocks whole blocks; returns the positions they hold.
  int32_t MatchPrefix(std::span<const int32_t> tokens, int32_t max_blocks, BlockTable& table);
  // Keys the blocks of `table` that the first n_computed of `tokens` fill.
  void RegisterFull(std::span<const int32_t> tokens, int32_t n_computed, BlockTable& table);
  // Releases every block of `table`, tail first so that the LRU evicts the ends
  // of prefixes before their starts, and empties it.
  void ReleaseAll(BlockTable& table);

 private:
  struct Block {
    int32_t refs = 0;
    bool keyed = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;              // this block's tokens when keyed
    std::list<int32_t>::iterator lru_pos;     // valid when keyed && refs == 0
  };

  const int32_t block_size_;
  const bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                       // never keyed, refs == 0
  std::list<int32_t> lru_;                          // keyed, refs == 0; front = oldest
  std::unordered_map<uint64_t, int32_t> by_hash_;  // keyed blocks
};

}  // namespace sinew::model
