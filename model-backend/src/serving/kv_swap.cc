#include "kv_swap.h"

#include <algorithm>
#include <string>

namespace sinew::model {

Result<std::unique_ptr<KvSwapSpace>> KvSwapSpace::Create(Backend& backend, const KvCache& kv,
                                                         size_t bytes) {
  const size_t slot_bytes = kv.block_bytes();
  if (slot_bytes == 0 || bytes / slot_bytes < 1) {
    return Status::InvalidArgument("KV swap space: " + std::to_string(bytes) +
                                   " bytes hold no KV block of " + std::to_string(slot_bytes) +
                                   " bytes");
  }
  const size_t n_slots = std::min<size_t>(bytes / slot_bytes, size_t{1} << 30);
  std::unique_ptr<KvSwapSpace> space(new KvSwapSpace());
  auto buffer = backend.memory().AllocateHost(n_slots * slot_bytes);
  if (!buffer.ok()) return buffer.status().WithContext("KV swap space");
  space->buffer_ = std::move(buffer).value();
  space->slot_bytes_ = slot_bytes;
  space->n_slots_ = static_cast<int32_t>(n_slots);
  // Taken from the back: low slots first.
  for (int32_t s = space->n_slots_ - 1; s >= 0; --s) space->free_.push_back(s);
  return space;
}

Status KvSwapSpace::SwapOut(const KvCache& kv, std::span<const int32_t> blocks,
                            std::vector<int32_t>& slots) {
  if (blocks.size() > free_.size()) {
    return Status::FailedPrecondition("KV swap space: " + std::to_string(blocks.size()) +
                                      " blocks, " + std::to_string(free_.size()) + " slots free");
  }
  std::vector<int32_t> taken(free_.end() - static_cast<std::ptrdiff_t>(blocks.size()), free_.end());
  std::reverse(taken.begin(), taken.end());
  std::vector<uint8_t*> host;
  for (int32_t t : taken) host.push_back(slot(t));
  SINEW_RETURN_IF_ERROR(kv.SaveBlocks(blocks, host));
  free_.resize(free_.size() - blocks.size());
  slots.insert(slots.end(), taken.begin(), taken.end());
  return Status::Ok();
}

Status KvSwapSpace::SwapIn(KvCache& kv, std::span<const int32_t> slots,
                           std::span<const int32_t> blocks) const {
  std::vector<uint8_t*> host;
  for (size_t i = 0; i < blocks.size(); ++i) host.push_back(slot(slots[i]));
  return kv.LoadBlocks(blocks, host);
}

void KvSwapSpace::Release(std::vector<int32_t>& slots) {
  free_.insert(free_.end(), slots.rbegin(), slots.rend());
  slots.clear();
}

}  // namespace sinew::model
