#include "paged_kv.h"

#include "kv_cache.h"

namespace sinew::model {

Result<std::unique_ptr<PagedKvStore>> PagedKvStore::Create(Backend& backend, int32_t n_layer,
                                                           int32_t n_blocks, int32_t block_size,
                                                           int64_t kv_dim, GgmlType type_k,
                                                           GgmlType type_v) {
  if (n_blocks < 1 || block_size < 1) {
    return Status::InvalidArgument("paged KV cache: n_blocks and block_size must be >= 1");
  }
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_k, kv_dim));
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_v, kv_dim));
  const int64_t rows = int64_t{n_blocks} * block_size;
  const int64_t k_bytes = GgmlRowSize(type_k, kv_dim) * rows;
  const int64_t v_bytes = GgmlRowSize(type_v, kv_dim) * rows;
  std::unique_ptr<PagedKvStore> store(new PagedKvStore());
  store->block_size_ = block_size;
  store->n_blocks_ = n_blocks;
  auto buffer = backend.memory().Allocate(static_cast<size_t>((k_bytes + v_bytes) * n_layer));
  if (!buffer.ok()) return buffer.status().WithContext("paged KV cache");
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

}  // namespace sinew::model
