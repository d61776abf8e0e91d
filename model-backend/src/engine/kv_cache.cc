#include "kv_cache.h"

#include <string>

namespace sinew::model {

Result<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, int32_t n_layer, int32_t n_ctx,
                                                 int64_t kv_dim, bool f16) {
  const GgmlType type = f16 ? GgmlType::kF16 : GgmlType::kF32;
  const int64_t per_tensor = GgmlRowSize(type, kv_dim) * n_ctx;
  const int64_t total = per_tensor * 2 * n_layer;
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->n_ctx_ = n_ctx;
  auto buffer = backend.memory().Allocate(static_cast<size_t>(total));
  if (!buffer.ok()) return buffer.status().WithContext("KV cache");
  cache->buffer_ = std::move(buffer).value();
  uint8_t* base = static_cast<uint8_t*>(cache->buffer_->data());
  for (int32_t l = 0; l < n_layer; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      Tensor t;
      t.type = type;
      t.ne = {kv_dim, n_ctx, 1, 1};
      t.data = base + (2 * l + kind) * per_tensor;
      (kind == 0 ? cache->k_ : cache->v_).push_back(t);
    }
  }
  return cache;
}

}  // namespace sinew::model
