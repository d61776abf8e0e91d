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

Result<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, int32_t n_layer, int32_t n_ctx,
                                                 int64_t kv_dim, GgmlType type_k,
                                                 GgmlType type_v) {
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_k, kv_dim));
  SINEW_RETURN_IF_ERROR(CheckKvType(backend, type_v, kv_dim));
  const int64_t k_bytes = GgmlRowSize(type_k, kv_dim) * n_ctx;
  const int64_t v_bytes = GgmlRowSize(type_v, kv_dim) * n_ctx;
  const int64_t total = (k_bytes + v_bytes) * n_layer;
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->n_ctx_ = n_ctx;
  auto buffer = backend.memory().Allocate(static_cast<size_t>(total));
  if (!buffer.ok()) return buffer.status().WithContext("KV cache");
  cache->buffer_ = std::move(buffer).value();
  uint8_t* base = static_cast<uint8_t*>(cache->buffer_->data());
  for (int32_t l = 0; l < n_layer; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      Tensor t;
      t.type = kind == 0 ? type_k : type_v;
      t.ne = {kv_dim, n_ctx, 1, 1};
      t.data = base;
      base += kind == 0 ? k_bytes : v_bytes;
      (kind == 0 ? cache->k_ : cache->v_).push_back(t);
    }
  }
  return cache;
}

}  // namespace sinew::model
