// PagedKvStore: the memory of a paged KV cache on a backend, and the batch a
// paged forward pass runs (Model::ForwardPaged, forward.cc).
//
// Layer l's K (and V) is a tensor of n_blocks * block_size rows of
// head_dim * n_head_kv values (F32, F16 or Q8_0; K and V may differ); block b holds rows
// [b * block_size, (b + 1) * block_size). Which block holds which positions of
// which sequence is the BlockManager's business (block_manager.h).
//
// Ownership: owns its buffers. Thread-safety: none (the scheduler thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model {

class PagedKvStore {
 public:
  // ResourceExhausted if the backend cannot hold it; the errors of CheckKvType
  // (kv_cache.h).
  [[nodiscard]] static Result<std::unique_ptr<PagedKvStore>> Create(
      Backend& backend, int32_t n_layer, int32_t n_blocks, int32_t block_size, int64_t kv_dim,
      GgmlType type_k, GgmlType type_v);

  // The bytes of one block in all layers, K and V (block_bytes() of a store of
  // these dimensions).
  static size_t BlockBytes(int32_t n_layer, int32_t block_size, int64_t kv_dim, GgmlType type_k,
                           GgmlType type_v);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  Tensor k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  Tensor v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }

  // Bytes that one block holds in all layers, K and V.
  size_t block_bytes() const { return block_bytes_; }
  // Copies block blocks[i] of every layer to block_bytes() of host memory at
  // host[i] (layer by layer, K rows then V rows), and back (the swap space,
  // kv_swap.h), all in one BackendBuffer::ReadMany / WriteMany.
  // REQUIRES: host.size() == blocks.size(). Errors: the backend's.
  [[nodiscard]] Status SaveBlocks(std::span<const int32_t> blocks,
                                  std::span<uint8_t* const> host) const;
  [[nodiscard]] Status LoadBlocks(std::span<const int32_t> blocks, std::span<uint8_t* const> host);

 private:
  PagedKvStore() = default;
  // The copies between blocks and host memory that SaveBlocks/LoadBlocks make.
  std::vector<BackendBuffer::HostCopy> BlockCopies(std::span<const int32_t> blocks,
                                                   std::span<uint8_t* const> host) const;

  int32_t block_size_ = 0;
  int32_t n_blocks_ = 0;
  size_t block_bytes_ = 0;
  std::unique_ptr<BackendBuffer> buffer_;
  std::vector<Tensor> k_, v_;
};

// How many KV blocks of `block_bytes` fit on a device with memory `mem` (after
// the weights are loaded) when at most `fraction` of its memory may be in use:
// (fraction * total - (total - free)) / block_bytes, and 0 when that is negative.
int64_t KvBlocksForDeviceMemory(const BackendMemory::DeviceMemoryInfo& mem, double fraction,
                                size_t block_bytes);

// One sequence's part of a batch: n_tokens consecutive tokens from position
// pos0, whose KV rows go to (and whose attention reads) the blocks of
// block_table, which covers positions [0, pos0 + n_tokens).
struct PagedSeq {
  int32_t n_tokens = 0;
  int32_t pos0 = 0;
  std::span<const int32_t> block_table;
  int32_t n_logits = 0;  // logits of its last n_logits tokens (0..n_tokens), in order
};

// Tokens of all sequences, back to back in the order of `seqs`.
struct PagedBatch {
  // The sequences' tokens back to back. A token may be FedToken(e) (backend.h):
  // the token of entry e of the last Model::QueueSampleLogits, not yet on the host.
  std::vector<int32_t> tokens;
  std::vector<PagedSeq> seqs;
  // Non-zero: the step's key for BackendOps::BeginStep (a step graph), given
  // only to batches whose ops have the same shapes whenever they have this key
  // (the scheduler's decode buckets). 0: no graph.
  uint64_t graph_key = 0;
};

}  // namespace sinew::model
