#include "kv_cache.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace sinew::model {

Status CheckKvType(Backend& backend, GgmlType type, int64_t kv_dim) {
  if (type != GgmlType::kF32 && type != GgmlType::kF16 && type != GgmlType::kQ8_0) {
    return Status::InvalidArgument("KV cache type " + std::string(GgmlTypeName(type)) +
                                   " is not supported (f32, f16, q8_0)");
  }
  if (kv_dim % GgmlBlockSize(type) != 0) {
    return Status::InvalidArgument("KV cache type " + std::string(GgmlTypeName(type)) +
                                   " needs rows that are a multiple of " +
                                   std::to_string(GgmlBlockSize(type)) + " values; this model's are " +
                                   std::to_string(kv_dim));
  }
  BackendOps& ops = backend.ops();
  for (Op op : {Op::kStoreKv, Op::kAttention}) {
    if (!ops.Supports(op, type)) {
      return Status::Unimplemented("backend " + std::string(backend.name()) + " has no " +
                                   std::string(OpName(op)) + " for a " +
                                   std::string(GgmlTypeName(type)) + " KV cache");
    }
  }
  return Status::Ok();
}

Result<GgmlType> ParseKvType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "f32") return GgmlType::kF32;
  if (lower == "f16") return GgmlType::kF16;
  if (lower == "q8_0") return GgmlType::kQ8_0;
  return Status::InvalidArgument("unknown KV cache type '" + std::string(name) +
                                 "' (expected f32, f16 or q8_0)");
}

Result<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, int32_t n_layer,
                                                 int32_t n_blocks, int32_t block_size,
                                                 int64_t kv_dim, GgmlType type_k, GgmlType type_v) {
  if (n_blocks < 1 || block_size < 1) {
    return Status::InvalidArgument("KV cache: n_blocks and block_size must be >= 1");
  }
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_k, kv_dim));
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_v, kv_dim));
  const int64_t rows = int64_t{n_blocks} * block_size;
  const int64_t k_bytes = GgmlRowSize(type_k, kv_dim) * rows;
  const int64_t v_bytes = GgmlRowSize(type_v, kv_dim) * rows;
  std::unique_ptr<KvCache> store(new KvCache());
  store->block_size_ = block_size;
  store->n_blocks_ = n_blocks;
  store->block_bytes_ = BlockBytes(n_layer, block_size, kv_dim, type_k, type_v);
  auto buffer = backend.memory().Allocate(static_cast<size_t>((k_bytes + v_bytes) * n_layer));
  if (!buffer.ok()) return buffer.status().WithContext("KV cache");
  store->buffer_ = std::move(buffer).value();
  uint8_t* base = static_cast<uint8_t*>(store->buffer_->data());
  for (int32_t l = 0; l < n_layer; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      Tensor t;
      t.type = kind == 0 ? type_k : type_v;
      t.ne = {kv_dim, rows, 1, 1};
      t.data = base;
      base += kind == 0 ? k_bytes : v_bytes;
      (kind == 0 ? store->k_ : store->v_).push_back(t);
    }
  }
  return store;
}

size_t KvCache::BlockBytes(int32_t n_layer, int32_t block_size, int64_t kv_dim, GgmlType type_k,
                           GgmlType type_v) {
  return static_cast<size_t>((GgmlRowSize(type_k, kv_dim) + GgmlRowSize(type_v, kv_dim)) *
                             block_size * n_layer);
}

int64_t KvBlocksForDeviceMemory(const BackendMemory::DeviceMemoryInfo& mem, double fraction,
                                size_t block_bytes) {
  const double in_use =
      static_cast<double>(mem.total_bytes - std::min(mem.free_bytes, mem.total_bytes));
  const double room = fraction * static_cast<double>(mem.total_bytes) - in_use;
  if (room <= 0 || block_bytes == 0) return 0;
  return static_cast<int64_t>(room / static_cast<double>(block_bytes));
}

std::vector<BackendBuffer::HostCopy> KvCache::BlockCopies(std::span<const int32_t> blocks,
                                                          std::span<uint8_t* const> host) const {
  const auto* base = static_cast<const uint8_t*>(buffer_->data());
  std::vector<BackendBuffer::HostCopy> copies;
  copies.reserve(blocks.size() * k_.size() * 2);
  for (size_t i = 0; i < blocks.size(); ++i) {
    uint8_t* at = host[i];
    for (size_t l = 0; l < k_.size(); ++l) {
      for (const Tensor* t : {&k_[l], &v_[l]}) {
        const auto bytes = static_cast<size_t>(t->row_bytes() * block_size_);
        const auto start = static_cast<size_t>(static_cast<const uint8_t*>(t->data) - base);
        copies.push_back({start + bytes * static_cast<size_t>(blocks[i]), at, bytes});
        at += bytes;
      }
    }
  }
  return copies;
}

Status KvCache::SaveBlocks(std::span<const int32_t> blocks, std::span<uint8_t* const> host) const {
  return buffer_->ReadMany(BlockCopies(blocks, host));
}

Status KvCache::LoadBlocks(std::span<const int32_t> blocks, std::span<uint8_t* const> host) {
  return buffer_->WriteMany(BlockCopies(blocks, host));
}

}  // namespace sinew::model
