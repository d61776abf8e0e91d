// KvCache: the keys and values of one sequence, per layer, on a backend.
//
// Kept apart from the model weights so that the next step (a paged cache
// shared by many sequences) can replace it without touching the model. Row p of
// layer l's K (and V) holds position p: head_dim * n_head_kv values, F32 or F16.
//
// Thread-safety: none; the engine uses it under its generation lock.
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
  // ResourceExhausted if the backend cannot hold it; the errors of CheckKvType.
  [[nodiscard]] static Result<std::unique_ptr<KvCache>> Create(Backend& backend, int32_t n_layer,
                                                               int32_t n_ctx, int64_t kv_dim,
                                                               GgmlType type_k, GgmlType type_v);

  int32_t n_ctx() const { return n_ctx_; }
  // Layer l's K / V with all n_ctx rows; views of the first rows are made by
  // the model (ne[1] = number of positions in use).
  Tensor k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  Tensor v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }
  // The whole cache as one block (for StoreKv and Attention): one sequence of
  // n_rows rows in block_size n_ctx.
  KvSeq seq(int32_t n_rows) const { return KvSeq{n_rows, std::span<const int32_t>(&zero_, 1)}; }

 private:
  KvCache() = default;
  int32_t n_ctx_ = 0;
  int32_t zero_ = 0;
  std::unique_ptr<BackendBuffer> buffer_;
  std::vector<Tensor> k_, v_;
};

}  // namespace sinew::model
