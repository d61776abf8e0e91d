// KvSwapSpace: host memory that keeps the KV blocks of preempted sequences
// (swap preemption), so that they resume where they stopped instead of
// recomputing their positions. It is cut into slots of one KV block each
// (KvCache::block_bytes: every layer's K and V rows of the block); a
// swapped sequence holds one slot per block it had, in block-table order.
//
// Ownership: owns its host buffer (BackendMemory::AllocateHost: page-locked on
// CUDA, so copies go by DMA; on the CPU mapped memory that costs only as it
// fills). Thread-safety: none (the serving scheduler's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv_cache.h"
#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model {

class KvSwapSpace {
 public:
  // As many slots as `bytes` holds. InvalidArgument if that is not even one
  // block; ResourceExhausted if the backend cannot allocate it.
  [[nodiscard]] static Result<std::unique_ptr<KvSwapSpace>> Create(Backend& backend,
                                                                   const KvCache& kv, size_t bytes);

  int32_t n_slots() const { return n_slots_; }
  int32_t available() const { return static_cast<int32_t>(free_.size()); }

  // Copies `blocks` of `kv` (in order) into free slots and appends the slots
  // to `slots`. FailedPrecondition if fewer than blocks.size() slots are free;
  // on any error no slot is taken.
  [[nodiscard]] Status SwapOut(const KvCache& kv, std::span<const int32_t> blocks,
                               std::vector<int32_t>& slots);
  // Copies slot slots[i] into block blocks[i] of `kv`, for every i of `blocks`.
  // REQUIRES: slots.size() >= blocks.size(). The slots stay taken.
  [[nodiscard]] Status SwapIn(KvCache& kv, std::span<const int32_t> slots,
                              std::span<const int32_t> blocks) const;
  // Frees `slots` and empties it.
  void Release(std::vector<int32_t>& slots);

 private:
  KvSwapSpace() = default;
  uint8_t* slot(int32_t s) const {
    return static_cast<uint8_t*>(buffer_->data()) + static_cast<size_t>(s) * slot_bytes_;
  }

  std::unique_ptr<BackendBuffer> buffer_;
  size_t slot_bytes_ = 0;
  int32_t n_slots_ = 0;
  std::vector<int32_t> free_;
};

}  // namespace sinew::model
