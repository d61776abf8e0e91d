// KvCache: the keys and values of the sequences a model runs, per layer, on a
// backend, in blocks (the paged KV cache that Model::Forward reads and writes).
//
// Layer l's K (and V) is a tensor of n_blocks * block_size rows of
// head_dim * n_head_kv values (F32, F16 or Q8_0; K and V may differ); block b
// holds rows [b * block_size, (b + 1) * block_size). Which block holds which
// positions of which sequence is the caller's business: the ServingEngine's
// BlockManager (src/serving/block_manager.h) hands blocks to many sequences;
// the one-sequence Engine uses one block of n_ctx rows (table {0}).
//
// Ownership: owns its buffers. Thread-safety: none (one thread at a time: the
// scheduler thread, or the Engine under its generation lock).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model {

// Ok if `backend` can store and attend over a cache of `type` with rows of
// kv_dim values: InvalidArgument for a type that is not F32, F16 or Q8_0 or
// whose blocks do not divide kv_dim; Unimplemented if the backend lacks it.
[[nodiscard]] Status CheckKvType(Backend& backend, GgmlType type, int64_t kv_dim);

// Parses a KV cache type name: "f32", "f16" or "q8_0" (any case).
[[nodiscard]] Result<GgmlType> ParseKvType(std::string_view name);

class KvCache {
 public:
  // InvalidArgument unless n_blocks and block_size are >= 1; ResourceExhausted
  // if the backend cannot hold it; the errors of CheckKvType.
  [[nodiscard]] static Result<std::unique_ptr<KvCache>> Create(Backend& backend, int32_t n_layer,
                                                               int32_t n_blocks, int32_t block_size,
                                                               int64_t kv_dim, GgmlType type_k,
                                                               GgmlType type_v);

  // The bytes of one block in all layers, K and V (block_bytes() of a cache of
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
  // src/serving/kv_swap.h), all in one BackendBuffer::ReadMany / WriteMany.
  // REQUIRES: host.size() == blocks.size(). Errors: the backend's.
  [[nodiscard]] Status SaveBlocks(std::span<const int32_t> blocks,
                                  std::span<uint8_t* const> host) const;
  [[nodiscard]] Status LoadBlocks(std::span<const int32_t> blocks, std::span<uint8_t* const> host);

 private:
  KvCache() = default;
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

}  // namespace sinew::model
