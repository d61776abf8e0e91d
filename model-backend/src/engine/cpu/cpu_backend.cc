// The CPU backend: host buffers (owned or wrapping mapped weights) and ops that
// run the kernel table on a thread pool.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/thread_pool.h"
#include "quant/quants.h"
#include "sinew/model/backend.h"
#include "sinew/model/sampling.h"

namespace sinew::model {
namespace {

using cpu::KernelTable;

enum class Ownership { kBorrowed, kMalloc, kMmap };

class HostBuffer final : public HostMemoryBuffer {
 public:
  HostBuffer(void* data, size_t size, Ownership owned, size_t mapped = 0)
      : HostMemoryBuffer(data, size), owned_(owned), mapped_(mapped) {}
  ~HostBuffer() override {
    if (owned_ == Ownership::kMalloc) std::free(data());
    if (owned_ == Ownership::kMmap) munmap(data(), mapped_);
  }

 private:
  Ownership owned_;
  size_t mapped_;
};

// Buffers from this size on come from anonymous mappings: zero pages that the
// kernel provides lazily, so a large KV cache costs memory only as it fills.
constexpr size_t kMmapThreshold = size_t{1} << 20;

class HostMemory final : public BackendMemory {
 public:
  Result<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    if (rounded >= kMmapThreshold) return Map(bytes);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return Status::ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes");
    }
    std::memset(p, 0, rounded);
    return std::unique_ptr<BackendBuffer>(
        std::make_unique<HostBuffer>(p, bytes, Ownership::kMalloc));
  }
  Result<std::unique_ptr<BackendBuffer>> WrapHost(const void* data, size_t bytes) override {
    return std::unique_ptr<BackendBuffer>(
        std::make_unique<HostBuffer>(const_cast<void*>(data), bytes, Ownership::kBorrowed));
  }
  // Host memory is what the CPU computes in; mapped, so it costs only as it fills.
  Result<std::unique_ptr<BackendBuffer>> AllocateHost(size_t bytes) override { return Map(bytes); }

 private:
  static Result<std::unique_ptr<BackendBuffer>> Map(size_t bytes) {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return Status::ResourceExhausted("cannot map " + std::to_string(bytes) + " bytes");
    }
    return std::unique_ptr<BackendBuffer>(
        std::make_unique<HostBuffer>(p, bytes, Ownership::kMmap, rounded));
  }
};

// Rows of work per chunk so that a chunk holds at least ~16K multiply-adds.
int64_t Grain(int64_t work_per_item) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_item));
}

// Row of a paged cache tensor that holds position `pos` (KvBlocks).
inline const uint8_t* KvRow(const Tensor& t, const KvBlocks& b, int64_t pos) {
  return t.row(int64_t{b.table[static_cast<size_t>(pos / b.block_size)]} * b.block_size +
               pos % b.block_size);
}

bool IsKvType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kQ8_0;
}

Status NotF32(Op op) {
  return Status::InvalidArgument(std::string(OpName(op)) + ": the CPU backend takes F32 tensors");
}

class CpuOps final : public BackendOps {
 public:
  CpuOps(const KernelTable& kernels, int n_threads) : k_(kernels), pool_(n_threads) {}

  bool Supports(Op op, GgmlType type) const override {
    switch (op) {
      case Op::kGetRows:
      case Op::kMatMul: return true;  // all seven weight types
      case Op::kStoreKv:
      case Op::kAttention: return IsKvType(type);
      default: return type == GgmlType::kF32;
    }
  }

  Status GetRows(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    SINEW_RETURN_IF_ERROR(
        CheckGetRowsIds(ids, table.rows(), static_cast<int64_t>(sampled_.size())));
    for (size_t i = 0; i < ids.size(); ++i) {
      int32_t id = ids[i];
      if (id < 0) id = std::max(sampled_[static_cast<size_t>(FedToken(id))].id, 0);
      quant::DequantizeRow(static_cast<uint32_t>(table.type), table.row(id),
                           out.f32() + static_cast<int64_t>(i) * out.ne[0], table.ne[0]);
    }
    return Status::Ok();
  }

  // Tile kernels give every element the same arithmetic whatever the tile's shape,
  // and the scalar table's one-row dot products are per row anyway
  // (backend_ops_test checks both bit for bit); the other ops are per row.
  bool RowInvariant() const override { return true; }

  // The AVX2 and AVX-512 matrix products go four rows per weight load (tiles);
  // scalar ones one row at a time.
  int32_t RowGroup() const override { return k_.level == cpu::SimdLevel::kScalar ? 1 : 4; }

  Status MatMul(const Tensor& w, const Tensor& x, Tensor& y) override {
    if (x.type != GgmlType::kF32 || y.type != GgmlType::kF32) return NotF32(Op::kMatMul);
    const int64_t K = w.ne[0];
    const int64_t N = w.rows();
    const int64_t M = x.rows();
    cpu::VecDotFn dot = nullptr;
    cpu::GemmTileFn tile = nullptr;
    cpu::QuantizeActFn quantize = nullptr;
    int64_t act_row_bytes = K * 4;
    int step_w = cpu::kTileRows;  // weight rows per tile
    switch (w.type) {
      case GgmlType::kF32: dot = k_.dot_f32, tile = k_.tile_f32, step_w = k_.float_tile_rows_w; break;
      case GgmlType::kF16: dot = k_.dot_f16, tile = k_.tile_f16, step_w = k_.float_tile_rows_w; break;
      case GgmlType::kBF16: dot = k_.dot_bf16, tile = k_.tile_bf16, step_w = k_.float_tile_rows_w; break;
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0:
        dot = w.type == GgmlType::kQ8_0 ? k_.dot_q8_0 : k_.dot_q4_0;
        tile = w.type == GgmlType::kQ8_0 ? k_.tile_q8_0 : k_.tile_q4_0;
        if (tile != nullptr) {
          quantize = k_.quantize_q8_0_tile;
          act_row_bytes = cpu::Q8TileActRowBytes(K);
          break;
        }
        quantize = k_.quantize_q8_0;
        act_row_bytes = K / quant::kQK8_0 * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ6_K:
        dot = w.type == GgmlType::kQ4_K ? k_.dot_q4_k : k_.dot_q6_k;
        tile = w.type == GgmlType::kQ4_K ? k_.tile_q4_k : k_.tile_q6_k;
        quantize = k_.quantize_q8_k;
        act_row_bytes = K / quant::kQKK * static_cast<int64_t>(sizeof(quant::BlockQ8_K));
        break;
    }
    const uint8_t* act = static_cast<const uint8_t*>(x.data);
    if (quantize != nullptr) {
      scratch_.resize(static_cast<size_t>(act_row_bytes * M));
      uint8_t* dst = scratch_.data();
      pool_.ParallelFor(M, Grain(K), [&](int64_t begin, int64_t end) {
        for (int64_t m = begin; m < end; ++m) quantize(x.f32() + m * K, dst + m * act_row_bytes, K);
      });
      act = dst;
    }
    float* out = y.f32();
    const uint8_t* wdata = static_cast<const uint8_t*>(w.data);
    const int64_t w_row_bytes = w.row_bytes();
    // Blocks of row_block weight rows (8 tiles) stay in L2 while each group of four
    // activation rows (in L1) passes over them.
    const int64_t row_block = 8 * int64_t{step_w};
    const int64_t grain = std::max(Grain(K * M), int64_t{8});
    if (tile != nullptr) {
      pool_.ParallelFor(N, grain, [&](int64_t begin, int64_t end) {
        for (int64_t n0 = begin; n0 < end; n0 += row_block) {
          const int64_t n1 = std::min(end, n0 + row_block);
          for (int64_t m = 0; m < M; m += cpu::kTileRows) {
            const int rows_x = static_cast<int>(std::min<int64_t>(cpu::kTileRows, M - m));
            for (int64_t n = n0; n < n1; n += step_w) {
              const int rows_w = static_cast<int>(std::min<int64_t>(step_w, n1 - n));
              tile(K, wdata + n * w_row_bytes, w_row_bytes, rows_w, act + m * act_row_bytes, act_row_bytes,
                   rows_x, out + m * N + n, N);
            }
          }
        }
      });
      return Status::Ok();
    }
    pool_.ParallelFor(N, grain, [&](int64_t begin, int64_t end) {
      for (int64_t n0 = begin; n0 < end; n0 += row_block) {
        const int64_t n1 = std::min(end, n0 + row_block);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = n0; n < n1; ++n) {
            out[m * N + n] = dot(K, wdata + n * w_row_bytes, act + m * act_row_bytes);
          }
        }
      }
    });
    return Status::Ok();
  }

  Status AddBias(Tensor& y, const Tensor& bias) override {
    const int64_t N = y.ne[0];
    for (int64_t r = 0; r < y.rows(); ++r) {
      float* row = y.f32() + r * N;
      for (int64_t n = 0; n < N; ++n) row[n] += bias.f32()[n];
    }
    return Status::Ok();
  }

  Status Add(const Tensor& a, const Tensor& b, Tensor& out) override {
    const int64_t n = a.elements();
    for (int64_t i = 0; i < n; ++i) out.f32()[i] = a.f32()[i] + b.f32()[i];
    return Status::Ok();
  }

  Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    const int64_t n = x.ne[0];
    // Rows are independent: each computed as alone, whichever thread takes it.
    pool_.ParallelFor(x.rows(), Grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* in = x.f32() + r * n;
        float* o = out.f32() + r * n;
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(in[i] * in[i]);
        const float mean = static_cast<float>(sum / static_cast<double>(n));
        const float scale = 1.0f / std::sqrt(mean + eps);
        for (int64_t i = 0; i < n; ++i) o[i] = (in[i] * scale) * weight.f32()[i];
      }
    });
    return Status::Ok();
  }

  Status Rope(Tensor& x, std::span<const int32_t> positions, const RopeParams& p) override {
    const int64_t head_dim = x.ne[0], n_heads = x.ne[1], n_tokens = x.ne[2];
    if (static_cast<int64_t>(positions.size()) < n_tokens) {
      return Status::InvalidArgument("Rope: fewer positions than tokens");
    }
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    const bool yarn = p.ext_factor != 0.0f;
    const float mscale =
        p.attn_factor * (yarn ? 1.0f + 0.1f * std::log(1.0f / p.freq_scale) : 1.0f);
    // Tokens are independent: each rotated as alone, whichever thread takes it.
    pool_.ParallelFor(n_tokens, Grain(n_heads * head_dim), [&](int64_t t_begin, int64_t t_end) {
      std::vector<float> cos_cache(static_cast<size_t>(p.n_rot / 2)), sin_cache(cos_cache.size());
      for (int64_t t = t_begin; t < t_end; ++t) {
        if (!yarn && mscale == 1.0f) {
          float theta = static_cast<float>(positions[static_cast<size_t>(t)]) * p.freq_scale;
          for (int32_t i = 0; i < p.n_rot / 2; ++i) {
            const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
            cos_cache[static_cast<size_t>(i)] = std::cos(theta / ff);
            sin_cache[static_cast<size_t>(i)] = std::sin(theta / ff);
            theta *= theta_scale;
          }
        } else {
          float theta_extrap = static_cast<float>(positions[static_cast<size_t>(t)]);
          for (int32_t i = 0; i < p.n_rot / 2; ++i) {
            const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
            const float extrap = theta_extrap / ff, interp = p.freq_scale * extrap;
            float theta = interp;
            if (yarn) {
              const float y =
                  (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
              const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
              theta = interp * (1.0f - mix) + extrap * mix;
            }
            cos_cache[static_cast<size_t>(i)] = std::cos(theta) * mscale;
            sin_cache[static_cast<size_t>(i)] = std::sin(theta) * mscale;
            theta_extrap *= theta_scale;
          }
        }
        for (int64_t h = 0; h < n_heads; ++h) {
          float* v = x.f32() + (t * n_heads + h) * head_dim;
          for (int32_t i = 0; i < p.n_rot / 2; ++i) {
            const int32_t a = p.style == RopeStyle::kNormal ? 2 * i : i;
            const int32_t b = p.style == RopeStyle::kNormal ? 2 * i + 1 : i + p.n_rot / 2;
            const float c = cos_cache[static_cast<size_t>(i)],
                        s = sin_cache[static_cast<size_t>(i)];
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
          }
        }
      }
    });
    return Status::Ok();
  }

  Status SwiGlu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    const int64_t n = gate.elements();
    const float* g = gate.f32();
    const float* u = up.f32();
    float* o = out.f32();
    pool_.ParallelFor(n, 8192, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    });
    return Status::Ok();
  }

  Status StoreKv(const Tensor& src, Tensor& dst, const KvBatch& batch,
                 std::span<const int32_t> positions) override {
    if (!IsKvType(dst.type)) return Unsupported(Op::kStoreKv, dst.type);
    const int64_t n = src.ne[0];
    if (dst.ne[0] != n || n % GgmlBlockSize(dst.type) != 0) {
      return Status::InvalidArgument("StoreKv: row width " + std::to_string(n) +
                                     " does not fit the cache rows of " +
                                     std::to_string(dst.ne[0]) + " " +
                                     std::string(GgmlTypeName(dst.type)));
    }
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, src.rows(), dst.rows()));
    const std::vector<KvBlocks> rows = RowBlocks(batch, src.rows());
    // Each row to its own cache row (CheckKvBatch: positions inside their tables).
    pool_.ParallelFor(src.rows(), Grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        quant::QuantizeRow(static_cast<uint32_t>(dst.type), src.f32() + r * n,
                           const_cast<uint8_t*>(KvRow(dst, rows[static_cast<size_t>(r)],
                                                      positions[static_cast<size_t>(r)])),
                           n);
      }
    });
    return Status::Ok();
  }

  Status Attention(const Tensor& q, const Tensor& k, const Tensor& v, const KvBatch& batch,
                   int32_t n_head_kv, std::span<const int32_t> positions, float scale,
                   Tensor& out) override {
    if (!IsKvType(k.type)) return Unsupported(Op::kAttention, k.type);
    if (!IsKvType(v.type)) return Unsupported(Op::kAttention, v.type);
    const int64_t head_dim = q.ne[0], n_head = q.ne[1], n_tokens = q.ne[2];
    if (n_head_kv < 1 || n_head % n_head_kv != 0) {
      return Status::InvalidArgument("Attention: bad head counts");
    }
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, n_tokens, k.rows()));
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, n_tokens, v.rows()));
    const std::vector<KvBlocks> row_blocks = RowBlocks(batch, n_tokens);
    const int64_t group = n_head / n_head_kv;
    int64_t max_keys = 0;
    for (int64_t t = 0; t < n_tokens; ++t) {
      max_keys = std::max<int64_t>(max_keys, positions[static_cast<size_t>(t)] + 1);
    }
    const cpu::GemmTileFn tile = k.type == GgmlType::kF16   ? k_.tile_f16
                                 : k.type == GgmlType::kF32 ? k_.tile_f32
                                                            : nullptr;
    const cpu::AttnValuesFn values = v.type == GgmlType::kF16   ? k_.attn_values_f16
                                     : v.type == GgmlType::kF32 ? k_.attn_values_f32
                                                                : nullptr;
    // One item: a token's `group` query heads on one KV head, which share each K and V
    // row they read.
    pool_.ParallelFor(
        n_tokens * n_head_kv, Grain(max_keys * head_dim * 2 * group), [&](int64_t begin, int64_t end) {
          thread_local std::vector<float> scores, row, inv_sum;
          scores.resize(static_cast<size_t>(group * max_keys));
          row.resize(static_cast<size_t>(head_dim));
          inv_sum.resize(static_cast<size_t>(group));
          for (int64_t item = begin; item < end; ++item) {
            const int64_t t = item / n_head_kv, kvh = item % n_head_kv;
            const int64_t n_keys = positions[static_cast<size_t>(t)] + 1;
            const KvBlocks& blocks = row_blocks[static_cast<size_t>(t)];
            const float* q0 = q.f32() + (t * n_head + kvh * group) * head_dim;
            if (tile != nullptr) {
              TileScores(tile, k, blocks, kvh, head_dim, q0, group, n_keys, max_keys,
                         scores.data());
            } else {
              RowScores(k, blocks, kvh, head_dim, q0, group, n_keys, max_keys, scores.data(),
                        row.data());
            }
            float* o0 = out.f32() + (t * n_head + kvh * group) * head_dim;
            for (int64_t g = 0; g < group; ++g) {
              inv_sum[static_cast<size_t>(g)] =
                  1.0f / k_.softmax(scores.data() + g * max_keys, n_keys, scale);
              std::fill(o0 + g * head_dim, o0 + (g + 1) * head_dim, 0.0f);
            }
            // Each head's values in key order, as one head alone would add them.
            if (values != nullptr) {
              TileValues(values, v, blocks, kvh, head_dim, scores.data(), max_keys, group,
                         n_keys, o0);
            } else {
              RowValues(v, blocks, kvh, head_dim, scores.data(), max_keys, group, n_keys, o0,
                        row.data());
            }
            for (int64_t g = 0; g < group; ++g) {
              float* o = o0 + g * head_dim;
              const float inv = inv_sum[static_cast<size_t>(g)];
              for (int64_t d = 0; d < head_dim; ++d) o[d] *= inv;
            }
          }
        });
    return Status::Ok();
  }

  Status Argmax(const Tensor& x, std::span<int32_t> out) override {
    if (static_cast<int64_t>(out.size()) < x.rows()) {
      return Status::InvalidArgument("Argmax: output shorter than the rows");
    }
    const int64_t n = x.ne[0];
    for (int64_t r = 0; r < x.rows(); ++r) {
      const float* row = x.f32() + r * n;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i) {
        if (row[i] > row[best]) best = i;
      }
      out[static_cast<size_t>(r)] = static_cast<int32_t>(best);
    }
    return Status::Ok();
  }

  // The CPU samples in QueueSampleRows; the tokens wait in sampled_.
  Status QueueSampleRows(Tensor& x, std::span<const RowSampling> rows,
                         std::span<const uint32_t> masks) override {
    const int64_t n = x.ne[0];
    SINEW_RETURN_IF_ERROR(CheckRowSampling(rows, x.rows(), n, masks, rows.size()));
    sampled_.assign(rows.size(), SampledToken{});
    const std::span<SampledToken> out(sampled_);
    const int64_t words = MaskWords(n);
    // Rows are independent: one per task (the log-sum-exp alone is a pass of
    // exp over the vocabulary).
    pool_.ParallelFor(static_cast<int64_t>(rows.size()), 1, [&](int64_t begin, int64_t end) {
      std::vector<std::pair<float, int32_t>> candidates;
      for (int64_t i = begin; i < end; ++i) {
        const RowSampling& r = rows[static_cast<size_t>(i)];
        const std::span<float> logits(x.f32() + static_cast<int64_t>(r.row) * n,
                                      static_cast<size_t>(n));
        bool any = r.mask < 0;
        if (r.mask >= 0) {
          const uint32_t* mask = masks.data() + r.mask * words;
          for (int64_t t = 0; t < n; ++t) {
            if ((mask[t / 32] >> (t % 32) & 1u) == 0) {
              logits[static_cast<size_t>(t)] = -INFINITY;
            } else {
              any = true;
            }
          }
        }
        if (!any) {
          out[static_cast<size_t>(i)] = SampledToken{};
          continue;
        }
        const int32_t id = ChooseToken(logits, r, candidates);
        out[static_cast<size_t>(i)] =
            SampledToken{id, logits[static_cast<size_t>(id)] - LogSumExp(logits)};
      }
    });
    return Status::Ok();
  }

  Status TakeSampled(std::span<SampledToken> out) override {
    if (out.size() != sampled_.size()) {
      return Status::InvalidArgument("TakeSampled: room for " + std::to_string(out.size()) +
                                     " tokens, the sample has " + std::to_string(sampled_.size()));
    }
    std::copy(sampled_.begin(), sampled_.end(), out.begin());
    return Status::Ok();
  }

 private:
  static Status Unsupported(Op op, GgmlType type) {
    return Status::Unimplemented(std::string(OpName(op)) + " on the CPU backend does not take " +
                                 std::string(GgmlTypeName(type)));
  }

  // Each row's sequence's blocks, for a batch of `rows` rows (checked by CheckKvBatch).
  static std::vector<KvBlocks> RowBlocks(const KvBatch& batch, int64_t rows) {
    std::vector<KvBlocks> out;
    out.reserve(static_cast<size_t>(rows));
    for (const KvSeq& seq : batch.seqs) {
      out.insert(out.end(), static_cast<size_t>(seq.n_rows), KvBlocks{seq.table, batch.block_size});
    }
    return out;
  }

  // Calls fn(j, rows) over keys [0, n_keys) in runs of up to max_rows consecutive
  // keys that never cross a block's end (so a run's cache rows are evenly spaced).
  template <typename Fn>
  static void ForKeyRuns(const KvBlocks& blocks, int64_t n_keys, int64_t max_rows, Fn fn) {
    for (int64_t j = 0; j < n_keys;) {
      const int64_t in_block = blocks.block_size - j % blocks.block_size;
      const int rows = static_cast<int>(std::min<int64_t>({max_rows, n_keys - j, in_block}));
      fn(j, rows);
      j += rows;
    }
  }

  // The unscaled scores of `group` query rows (q0, head_dim floats apart) against keys
  // [0, n_keys) of KV head kvh: scores[g * stride + j]. Through the matrix-product tile
  // kernel, up to four keys by up to four heads a call: each K row is loaded once for
  // its heads, and every score gets the tile's arithmetic whatever the tile's shape, so
  // a token's attention does not depend on its batch.
  static void TileScores(cpu::GemmTileFn tile, const Tensor& k, const KvBlocks& blocks,
                         int64_t kvh, int64_t head_dim, const float* q0, int64_t group,
                         int64_t n_keys, int64_t stride, float* scores) {
    const int64_t head_offset = GgmlRowSize(k.type, kvh * head_dim);
    ForKeyRuns(blocks, n_keys, cpu::kTileRows, [&](int64_t j, int rows_w) {
      for (int64_t g = 0; g < group; g += cpu::kTileRows) {
        const int rows_x = static_cast<int>(std::min<int64_t>(cpu::kTileRows, group - g));
        tile(head_dim, KvRow(k, blocks, j) + head_offset, k.row_bytes(), rows_w,
             q0 + g * head_dim, head_dim * 4, rows_x, scores + g * stride + j, stride);
      }
    });
  }

  // Adds to the `group` output rows (o0, head_dim floats apart) the values of keys
  // [0, n_keys) of KV head kvh weighted by p[g * p_stride + j], a block's run of value
  // rows a call; every element gets what HeadAxpy row after row gives it.
  static void TileValues(cpu::AttnValuesFn values, const Tensor& v, const KvBlocks& blocks,
                         int64_t kvh, int64_t head_dim, const float* p, int64_t p_stride,
                         int64_t group, int64_t n_keys, float* o0) {
    const int64_t head_offset = GgmlRowSize(v.type, kvh * head_dim);
    ForKeyRuns(blocks, n_keys, blocks.block_size, [&](int64_t j, int rows_v) {
      values(head_dim, KvRow(v, blocks, j) + head_offset, v.row_bytes(), rows_v, p + j,
             p_stride, static_cast<int>(group), o0, head_dim);
    });
  }

  // The scores and values of caches the tile kernels do not take (Q8_0, or a kernel
  // table without tiles), one key row at a time: each row's slice of KV head kvh is
  // read (dequantized into `tmp`, head_dim floats, where quantized) once for the group.
  void RowScores(const Tensor& k, const KvBlocks& blocks, int64_t kvh, int64_t head_dim,
                 const float* q0, int64_t group, int64_t n_keys, int64_t stride, float* scores,
                 float* tmp) const {
    for (int64_t j = 0; j < n_keys; ++j) {
      const HeadSlice key = SliceOf(k, KvRow(k, blocks, j), kvh * head_dim, head_dim, tmp);
      for (int64_t g = 0; g < group; ++g) {
        scores[g * stride + j] = HeadDot(key, head_dim, q0 + g * head_dim);
      }
    }
  }
  void RowValues(const Tensor& v, const KvBlocks& blocks, int64_t kvh, int64_t head_dim,
                 const float* p, int64_t p_stride, int64_t group, int64_t n_keys, float* o0,
                 float* tmp) const {
    for (int64_t j = 0; j < n_keys; ++j) {
      const HeadSlice value = SliceOf(v, KvRow(v, blocks, j), kvh * head_dim, head_dim, tmp);
      for (int64_t g = 0; g < group; ++g) {
        HeadAxpy(value, head_dim, p[g * p_stride + j], o0 + g * head_dim);
      }
    }
  }

  // Elements [off, off + n) of a cache row of `type`: F16 and F32 in place, other types
  // dequantized into `tmp` (then `data` holds F32).
  struct HeadSlice {
    GgmlType type;
    const void* data;
  };
  static HeadSlice SliceOf(const Tensor& t, const uint8_t* row, int64_t off, int64_t n,
                           float* tmp) {
    switch (t.type) {
      case GgmlType::kF16:
        return {t.type, row + off * 2};
      case GgmlType::kF32:
        return {t.type, row + off * 4};
      default:
        quant::DequantizeSpan(static_cast<uint32_t>(t.type), row, off, n, tmp);
        return {t.type, tmp};
    }
  }

  float HeadDot(HeadSlice s, int64_t n, const float* q) const {
    switch (s.type) {
      case GgmlType::kF16:
        return k_.dot_f16(n, s.data, q);
      case GgmlType::kF32: {
        const float* r = static_cast<const float*>(s.data);
        if (n > 16) return k_.dot_f32(n, r, q);
        // Small heads (e.g. 8 wide): a plain loop beats a kernel call per key.
        float sum = 0;
        for (int64_t d = 0; d < n; ++d) sum += r[d] * q[d];
        return sum;
      }
      default:
        return k_.dot_f32(n, s.data, q);
    }
  }

  // o += a * the slice.
  void HeadAxpy(HeadSlice s, int64_t n, float a, float* o) const {
    switch (s.type) {
      case GgmlType::kF16:
        k_.axpy_f16(n, a, s.data, o);
        return;
      case GgmlType::kF32: {
        const float* r = static_cast<const float*>(s.data);
        if (n > 16) {
          k_.axpy_f32(n, a, r, o);
        } else {
          for (int64_t d = 0; d < n; ++d) o[d] += a * r[d];
        }
        return;
      }
      default:
        k_.axpy_f32(n, a, s.data, o);
    }
  }

 private:
  const KernelTable k_;
  cpu::ThreadPool pool_;
  std::vector<SampledToken> sampled_;  // the last QueueSampleRows (GetRows's FedToken ids)
  std::vector<uint8_t> scratch_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const KernelTable& kernels, int n_threads)
      : name_(std::string("cpu-") + kernels.name), ops_(kernels, n_threads) {}
  std::string_view name() const override { return name_; }
  std::string device() const override { return "cpu"; }
  BackendMemory& memory() override { return memory_; }
  BackendOps& ops() override { return ops_; }

 private:
  std::string name_;
  HostMemory memory_;
  CpuOps ops_;
};

}  // namespace

namespace {
// Why a level may be missing on a CPU that has it: the environment's cap.
std::string CapNote() {
  const char* cap = std::getenv("SINEW_CPU_LEVEL");
  return cap != nullptr && *cap != '\0' ? std::string(" (or SINEW_CPU_LEVEL=") + cap + " leaves it out)"
                                         : std::string();
}
}  // namespace

Result<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  if (cpu::SimdLevel cap; !cpu::CpuLevelCap(&cap)) {
    return Status::InvalidArgument(std::string("SINEW_CPU_LEVEL='") + std::getenv("SINEW_CPU_LEVEL") +
                                   "' is not a kernel level (scalar, avx2 or avx512)");
  }
  cpu::SimdLevel level;
  if (options.simd == "auto") {
    level = cpu::CpuHasAvx512() ? cpu::SimdLevel::kAvx512
            : cpu::CpuHasAvx2() ? cpu::SimdLevel::kAvx2
                                : cpu::SimdLevel::kScalar;
  } else if (options.simd == "avx512") {
    if (!cpu::CpuHasAvx512()) {
      return Status::Unimplemented("this CPU lacks AVX-512 (F, BW, VL, VNNI)" + CapNote());
    }
    level = cpu::SimdLevel::kAvx512;
  } else if (options.simd == "avx2") {
    if (!cpu::CpuHasAvx2()) return Status::Unimplemented("this CPU lacks AVX2/FMA/F16C" + CapNote());
    level = cpu::SimdLevel::kAvx2;
  } else if (options.simd == "scalar") {
    level = cpu::SimdLevel::kScalar;
  } else {
    return Status::InvalidArgument("unknown SIMD level '" + options.simd +
                                   "' (expected auto, avx512, avx2 or scalar)");
  }
  if (options.n_threads < 0 || options.n_threads > 1024) {
    return Status::InvalidArgument("n_threads must be 0..1024, got " +
                                   std::to_string(options.n_threads));
  }
  int n_threads = options.n_threads;
  if (n_threads == 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::unique_ptr<Backend>(
      std::make_unique<CpuBackend>(cpu::MakeKernelTable(level), n_threads));
}

}  // namespace sinew::model
