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
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model {

class KvCache {
 public:
  // ResourceExhausted if the backend cannot hold it.
  [[nodiscard]] static Result<std::unique_ptr<KvCache>> Create(Backend& backend, int32_t n_layer,
                                                               int32_t n_ctx, int64_t kv_dim,
                                                               bool f16);

  int32_t n_ctx() const { return n_ctx_; }
  // Layer l's K / V with all n_ctx rows; views of the first rows are made by
  // the model (ne[1] = number of positions in use).
  Tensor k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  Tensor v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }

 private:
  KvCache() = default;
  int32_t n_ctx_ = 0;
  std::unique_ptr<BackendBuffer> buffer_;
  std::vector<Tensor> k_, v_;
};

}  // namespace sinew::model
