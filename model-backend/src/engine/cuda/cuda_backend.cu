// The CUDA backend: its memory (device_memory.cuh), one stream, and ops that
// launch the kernels of this folder. Every CUDA and cuBLAS error becomes a Status that
// names the call; kernels are checked at launch, and faults during execution
// surface at the next synchronising call (Synchronize, Read) as a Status.
#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda/argmax.cuh"
#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/cuda_status.cuh"
#include "cuda/device_memory.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/getrows.cuh"
#include "cuda/kv_store.cuh"
#include "cuda/matmul.cuh"
#include "cuda/norm.cuh"
#include "cuda/rope.cuh"
#include "cuda/sample.cuh"
#include "cuda/step_graph.cuh"
#include "sinew/model/backend.h"

namespace sinew::model {

bool HaveCudaBackend() { return true; }

namespace cuda {
namespace {

Status CublasStatus(const char* call, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal(std::string(call) + ": " + cublasGetStatusName(s) + " (" +
                          cublasGetStatusString(s) + ")");
}

// A device scratch area that grows on demand (contents are per op).
class Scratch {
 public:
  ~Scratch() {
    if (data_ != nullptr) cudaFree(data_);
  }
  size_t capacity() const { return size_; }
  void* data() const { return data_; }
  Result<void*> Get(size_t bytes) {
    if (bytes <= size_) return data_;
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
    const cudaError_t err = cudaMalloc(&data_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      data_ = nullptr;
      return CudaStatus(("cudaMalloc of " + std::to_string(bytes) + " scratch bytes").c_str(), err);
    }
    size_ = bytes;
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

bool IsKvType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kQ8_0;
}

class CudaOps final : public BackendOps {
 public:
  explicit CudaOps(Context& ctx) : ctx_(ctx), graphs_(kSlots, ctx.stream) {}
  ~CudaOps() override {
    if (ctx_.Use().ok()) {
      if (sampled_host_ != nullptr) cudaFreeHost(sampled_host_);
      if (sampled_ready_ != nullptr) cudaEventDestroy(sampled_ready_);
    }
  }
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  bool Supports(Op op, GgmlType type) const override {
    switch (op) {
      case Op::kGetRows:
      case Op::kMatMul: return true;
      case Op::kStoreKv:
      case Op::kAttention: return IsKvType(type);
      default: return type == GgmlType::kF32;
    }
  }

  // Every op but MatMul computes a row alike whatever the batch; MatMul does
  // once every M goes through LaunchMatMulCols (matmul.cuh), at the price of
  // tensor cores for prompts.
  bool RowInvariant() const override { return row_invariant_; }
  bool MakeRowInvariant() override {
    row_invariant_ = true;
    return true;
  }

  // Step graphs (step_graph.cuh): every op below passes its kernels' arguments
  // to graphs_.Launch before launching them, and skips them while a step fills.
  bool CapturesSteps() const override { return true; }
  void BeginStep(uint64_t key) override {
    if (ctx_.Use().ok()) graphs_.Begin(key);
  }
  Result<bool> EndStep(const Status& ops) override { return graphs_.End(ops); }
  StepGraphCounts step_graph_counts() const override { return graphs_.counts(); }

  Status GetRows(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    SINEW_RETURN_IF_ERROR(CheckGetRowsIds(ids, table.rows(), n_sampled_));
    SINEW_ASSIGN_OR_RETURN(const int32_t* d_ids, UploadInts(ids, kIds));
    // FedToken ids read the last QueueSampleRows's tokens where its kernel wrote them.
    const auto* fed = static_cast<const SampledToken*>(sample_scratch_.data());
    if (!graphs_.Launch({1, P(table.data), static_cast<uint64_t>(table.type), U(table.row_bytes()),
                         U(table.ne[0]), P(d_ids), P(fed), U(ids.size()), P(out.data)})) {
      return Status::Ok();
    }
    return CudaStatus("GetRows kernel",
                      LaunchGetRows(table.type, table.data, table.row_bytes(), table.ne[0], d_ids,
                                    fed, static_cast<int64_t>(ids.size()), out.f32(), ctx_.stream));
  }

  Status MatMul(const Tensor& w, const Tensor& x, Tensor& y) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    const int64_t K = w.ne[0], N = w.rows(), M = x.rows();
    if (x.ne[0] != K || y.ne[0] != N || y.rows() != M) {
      return Status::InvalidArgument("MatMul: shapes disagree");
    }
    if (M <= kMatMulCols || row_invariant_) {
      if (!graphs_.Launch({2, P(w.data), static_cast<uint64_t>(w.type), U(K), U(N), U(M), P(x.data),
                           P(y.data)})) {
        return Status::Ok();
      }
      return CudaStatus("MatMulCols kernel", LaunchMatMulCols(w.type, w.data, w.row_bytes(), K, N,
                                                              x.f32(), M, y.f32(), ctx_.stream));
    }
    const float alpha = 1.0f, beta = 0.0f;
    if (w.type == GgmlType::kF32) {
      if (!graphs_.Launch({3, P(w.data), U(K), U(N), U(M), P(x.data), P(y.data)})) {
        return Status::Ok();
      }
      return CublasStatus("cublasSgemm",
                          cublasSgemm(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                                      static_cast<int>(M), static_cast<int>(K), &alpha, w.f32(),
                                      static_cast<int>(K), x.f32(), static_cast<int>(K), &beta,
                                      y.f32(), static_cast<int>(N)));
    }
    // Weights as F16 (dequantized unless they are F16 already), activations as F16.
    const size_t w_bytes = w.type == GgmlType::kF16 ? 0 : static_cast<size_t>(K * N) * 2;
    SINEW_ASSIGN_OR_RETURN(void* wbuf, weight_scratch_.Get(std::max<size_t>(w_bytes, 256)));
    SINEW_ASSIGN_OR_RETURN(void* xbuf, act_scratch_.Get(static_cast<size_t>(K * M) * 2));
    if (!graphs_.Launch({4, P(w.data), static_cast<uint64_t>(w.type), U(K), U(N), U(M), P(x.data),
                         P(y.data), P(wbuf), P(xbuf)})) {
      return Status::Ok();
    }
    const void* wf16 = w.data;
    if (w.type != GgmlType::kF16) {
      SINEW_RETURN_IF_ERROR(CudaStatus(
          "DequantF16 kernel", LaunchDequantF16(w.type, w.data, w.row_bytes(), K, N,
                                                static_cast<__half*>(wbuf), ctx_.stream)));
      wf16 = wbuf;
    }
    SINEW_RETURN_IF_ERROR(CudaStatus(
        "F32ToF16 kernel",
        LaunchF32ToF16(x.f32(), static_cast<__half*>(xbuf), K * M, ctx_.stream)));
    return CublasStatus(
        "cublasGemmEx",
        cublasGemmEx(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                     static_cast<int>(M), static_cast<int>(K), &alpha, wf16, CUDA_R_16F,
                     static_cast<int>(K), xbuf, CUDA_R_16F, static_cast<int>(K), &beta, y.f32(),
                     CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  Status AddBias(Tensor& y, const Tensor& bias) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!graphs_.Launch({5, P(y.data), P(bias.data), U(y.ne[0]), U(y.rows())})) {
      return Status::Ok();
    }
    return CudaStatus("AddBias kernel",
                      LaunchAddBias(y.f32(), bias.f32(), y.ne[0], y.rows(), ctx_.stream));
  }

  Status Add(const Tensor& a, const Tensor& b, Tensor& out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!graphs_.Launch({6, P(a.data), P(b.data), P(out.data), U(a.elements())})) {
      return Status::Ok();
    }
    return CudaStatus("Add kernel",
                      LaunchAdd(a.f32(), b.f32(), out.f32(), a.elements(), ctx_.stream));
  }

  Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!graphs_.Launch(
            {7, P(x.data), P(weight.data), F(eps), U(x.ne[0]), U(x.rows()), P(out.data)})) {
      return Status::Ok();
    }
    return CudaStatus("RmsNorm kernel", LaunchRmsNorm(x.f32(), weight.f32(), eps, x.ne[0],
                                                      x.rows(), out.f32(), ctx_.stream));
  }

  Status Rope(Tensor& x, std::span<const int32_t> positions, const RopeParams& p) override {
    if (p.ext_factor != 0.0f || p.attn_factor != 1.0f) {
      return Status::Unimplemented("Rope: YaRN scaling is not implemented on CUDA yet");
    }
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    const int64_t n_tokens = x.ne[2];
    if (static_cast<int64_t>(positions.size()) < n_tokens) {
      return Status::InvalidArgument("Rope: fewer positions than tokens");
    }
    SINEW_ASSIGN_OR_RETURN(
        const int32_t* d_pos,
        UploadInts(positions.first(static_cast<size_t>(n_tokens)), kPositions));
    const float* d_factors = nullptr;
    if (p.freq_factors != nullptr) {
      const size_t n = static_cast<size_t>(p.n_rot / 2);
      SINEW_ASSIGN_OR_RETURN(d_factors,
                             Upload(std::span<const float>(p.freq_factors, n), kFactors));
    }
    if (!graphs_.Launch({8, P(x.data), U(x.ne[0]), U(x.ne[1]), U(n_tokens), P(d_pos),
                         static_cast<uint64_t>(p.style), U(p.n_rot), F(p.freq_base),
                         F(p.freq_scale), P(d_factors)})) {
      return Status::Ok();
    }
    return CudaStatus("Rope kernel",
                      LaunchRope(x.f32(), x.ne[0], x.ne[1], n_tokens, d_pos, p.style, p.n_rot,
                                 p.freq_base, p.freq_scale, d_factors, ctx_.stream));
  }

  Status SwiGlu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!graphs_.Launch({9, P(gate.data), P(up.data), P(out.data), U(gate.elements())})) {
      return Status::Ok();
    }
    return CudaStatus("SwiGlu kernel",
                      LaunchSwiGlu(gate.f32(), up.f32(), out.f32(), gate.elements(), ctx_.stream));
  }

  Status StoreKv(const Tensor& src, Tensor& dst, const KvBatch& batch,
                 std::span<const int32_t> positions) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!IsKvType(dst.type)) return Status::Unimplemented("StoreKv: unsupported cache type");
    if (dst.ne[0] != src.ne[0] || src.ne[0] % GgmlBlockSize(dst.type) != 0) {
      return Status::InvalidArgument("StoreKv: row width does not fit the cache rows");
    }
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, src.rows(), dst.rows()));
    SINEW_ASSIGN_OR_RETURN(const KvRows rows, UploadKvBatch(batch, positions, src.rows()));
    if (!graphs_.Launch({10, P(src.data), U(src.ne[0]), U(src.rows()),
                         static_cast<uint64_t>(dst.type), P(dst.data), U(dst.row_bytes()),
                         P(rows.tables), P(rows.table_start), P(rows.positions),
                         U(rows.block_size)})) {
      return Status::Ok();
    }
    return CudaStatus("StoreKv kernel",
                      LaunchStoreKv(src.f32(), src.ne[0], src.rows(), dst.type, dst.data,
                                    dst.row_bytes(), rows, ctx_.stream));
  }

  Status Attention(const Tensor& q, const Tensor& k, const Tensor& v, const KvBatch& batch,
                   int32_t n_head_kv, std::span<const int32_t> positions, float scale,
                   Tensor& out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (!IsKvType(k.type) || !IsKvType(v.type)) {
      return Status::Unimplemented("Attention: unsupported cache type");
    }
    AttentionArgs a;
    a.head_dim = q.ne[0];
    a.n_head = q.ne[1];
    a.n_tokens = q.ne[2];
    a.n_head_kv = n_head_kv;
    if (a.head_dim > kMaxHeadDim || n_head_kv < 1 || a.n_head % n_head_kv != 0) {
      return Status::InvalidArgument("Attention: head size above " + std::to_string(kMaxHeadDim) +
                                     " or bad head counts");
    }
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, a.n_tokens, k.rows()));
    SINEW_RETURN_IF_ERROR(CheckKvBatch(batch, positions, a.n_tokens, v.rows()));
    SINEW_ASSIGN_OR_RETURN(a.rows, UploadKvBatch(batch, positions, a.n_tokens));
    a.q = q.f32();
    a.k = static_cast<const uint8_t*>(k.data);
    a.v = static_cast<const uint8_t*>(v.data);
    a.k_type = k.type;
    a.v_type = v.type;
    a.k_row_bytes = k.row_bytes();
    a.v_row_bytes = v.row_bytes();
    a.scale = scale;
    a.out = out.f32();
    if (!graphs_.Launch({11, P(a.q), P(a.k), P(a.v), static_cast<uint64_t>(a.k_type),
                         static_cast<uint64_t>(a.v_type), U(a.k_row_bytes), U(a.v_row_bytes),
                         P(a.rows.tables), P(a.rows.table_start), P(a.rows.positions),
                         U(a.rows.block_size), U(a.head_dim), U(a.n_head), U(a.n_head_kv),
                         U(a.n_tokens), F(scale), P(a.out)})) {
      return Status::Ok();
    }
    return CudaStatus("Attention kernel", LaunchAttention(a, ctx_.stream));
  }

  Status Argmax(const Tensor& x, std::span<int32_t> out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (graphs_.active()) return Status::FailedPrecondition("Argmax: reads back inside a step");
    const int64_t rows = x.rows();
    if (static_cast<int64_t>(out.size()) < rows) {
      return Status::InvalidArgument("Argmax: output shorter than the rows");
    }
    SINEW_ASSIGN_OR_RETURN(void* d_out, argmax_scratch_.Get(static_cast<size_t>(rows) * 4 + 4));
    SINEW_RETURN_IF_ERROR(CudaStatus(
        "Argmax kernel",
        LaunchArgmax(x.f32(), x.ne[0], rows, static_cast<int32_t*>(d_out), ctx_.stream)));
    SINEW_CUDA_RETURN(cudaMemcpyAsync(out.data(), d_out, static_cast<size_t>(rows) * 4,
                                      cudaMemcpyDeviceToHost, ctx_.stream));
    SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    return Status::Ok();
  }

  // The kernel writes the tokens to sample_scratch_ (where GetRows feeds them
  // from), and one copy brings them to pinned sampled_host_, after which
  // sampled_ready_ fires: TakeSampled waits for that event alone, not for what
  // was queued after (the next step's forward).
  bool QueuesWork() const override { return true; }
  Status QueueSampleRows(Tensor& x, std::span<const RowSampling> rows,
                         std::span<const uint32_t> masks) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    SINEW_RETURN_IF_ERROR(CheckRowSampling(rows, x.rows(), x.ne[0], masks, rows.size()));
    if (graphs_.active()) return Status::FailedPrecondition("SampleRows: reads back inside a step");
    n_sampled_ = 0;
    if (rows.empty()) return Status::Ok();
    const size_t out_bytes = rows.size() * sizeof(SampledToken);
    SINEW_RETURN_IF_ERROR(EnsureSampledHost(out_bytes));
    SINEW_ASSIGN_OR_RETURN(const RowSampling* d_rows, Upload(rows, kSampleRows));
    SINEW_ASSIGN_OR_RETURN(const uint32_t* d_masks, Upload(masks, kMasks));
    // Grown in steps, so that a step graph's GetRows keeps its pointer.
    SINEW_ASSIGN_OR_RETURN(void* d_out, sample_scratch_.Get(std::max<size_t>(out_bytes, 4096)));
    SINEW_RETURN_IF_ERROR(
        CudaStatus("SampleRows kernel",
                   LaunchSampleRows(x.f32(), x.ne[0], d_rows, static_cast<int64_t>(rows.size()),
                                    d_masks, static_cast<SampledToken*>(d_out), ctx_.stream)));
    SINEW_CUDA_RETURN(
        cudaMemcpyAsync(sampled_host_, d_out, out_bytes, cudaMemcpyDeviceToHost, ctx_.stream));
    SINEW_CUDA_RETURN(cudaEventRecord(sampled_ready_, ctx_.stream));
    n_sampled_ = static_cast<int64_t>(rows.size());
    return Status::Ok();
  }

  Status TakeSampled(std::span<SampledToken> out) override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (static_cast<int64_t>(out.size()) != n_sampled_) {
      return Status::InvalidArgument("TakeSampled: room for " + std::to_string(out.size()) +
                                     " tokens, the sample has " + std::to_string(n_sampled_));
    }
    if (out.empty()) return Status::Ok();
    SINEW_CUDA_RETURN(cudaEventSynchronize(sampled_ready_));
    std::memcpy(out.data(), sampled_host_, out.size() * sizeof(SampledToken));
    return Status::Ok();
  }

  Status Synchronize() override {
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(ctx_.stream));
  }

 private:
  // Host arrays an op needs on the device, each kind in its own device slot.
  enum Slot {
    kIds,
    kPositions,
    kTable,
    kTableStart,
    kFactors,
    kAttnPositions,
    kSampleRows,
    kMasks,
    kSlots
  };

  // A checked KvBatch of `rows` rows on the device: the sequences' tables back
  // to back, each row's table start, and the positions. The same batch in
  // every layer (and in StoreKv and Attention) finds the slots holding it.
  Result<KvRows> UploadKvBatch(const KvBatch& batch, std::span<const int32_t> positions,
                               int64_t rows) {
    tables_.clear();
    table_start_.clear();
    for (const KvSeq& seq : batch.seqs) {
      table_start_.insert(table_start_.end(), static_cast<size_t>(seq.n_rows),
                          static_cast<int32_t>(tables_.size()));
      tables_.insert(tables_.end(), seq.table.begin(), seq.table.end());
    }
    KvRows out;
    out.block_size = batch.block_size;
    SINEW_ASSIGN_OR_RETURN(out.tables, UploadInts(std::span<const int32_t>(tables_), kTable));
    SINEW_ASSIGN_OR_RETURN(out.table_start,
                           UploadInts(std::span<const int32_t>(table_start_), kTableStart));
    SINEW_ASSIGN_OR_RETURN(
        out.positions, UploadInts(positions.first(static_cast<size_t>(rows)), kAttnPositions));
    return out;
  }

  // Copies `values` to the device slot of its kind, ordered on the stream
  // before the op's kernel, unless the slot already holds exactly these bytes
  // (the positions, block table and rope factors repeat in every layer, so a
  // decode step uploads each once). A pageable-source cudaMemcpyAsync has
  // consumed `values` when it returns, and a kernel still reading the slot runs
  // before the copy (one stream), so reuse is safe.
  template <typename T>
  Result<const T*> Upload(std::span<const T> values, Slot slot) {
    const size_t bytes = values.size() * sizeof(T);
    if (bytes == 0) return static_cast<const T*>(nullptr);
    if (graphs_.active()) {
      SINEW_ASSIGN_OR_RETURN(const void* p, graphs_.Upload(values.data(), bytes, slot));
      return static_cast<const T*>(p);
    }
    std::vector<uint8_t>& shadow = shadow_[slot];
    if (bytes > slots_[slot].capacity()) shadow.clear();  // a new allocation holds nothing
    SINEW_ASSIGN_OR_RETURN(void* dst, slots_[slot].Get(std::max<size_t>(bytes, 4096)));
    if (shadow.size() != bytes || std::memcmp(shadow.data(), values.data(), bytes) != 0) {
      shadow.clear();  // until the copy is queued
      SINEW_CUDA_RETURN(
          cudaMemcpyAsync(dst, values.data(), bytes, cudaMemcpyHostToDevice, ctx_.stream));
      const auto* raw = reinterpret_cast<const uint8_t*>(values.data());
      shadow.assign(raw, raw + bytes);
    }
    return static_cast<const T*>(dst);
  }
  Result<const int32_t*> UploadInts(std::span<const int32_t> values, Slot slot) {
    return Upload(values, slot);
  }

  Context& ctx_;
  // Arguments of an op's kernels, for graphs_.Launch.
  static uint64_t P(const void* p) { return reinterpret_cast<uintptr_t>(p); }
  static uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }
  static uint64_t F(float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
  }

  // Pinned room for `bytes` of sampled tokens, and the event TakeSampled waits for.
  Status EnsureSampledHost(size_t bytes) {
    if (sampled_ready_ == nullptr) {
      SINEW_CUDA_RETURN(cudaEventCreateWithFlags(&sampled_ready_, cudaEventDisableTiming));
    }
    if (bytes <= sampled_host_bytes_) return Status::Ok();
    if (sampled_host_ != nullptr) cudaFreeHost(sampled_host_);  // waits for its copies
    sampled_host_ = nullptr;
    sampled_host_bytes_ = 0;
    const size_t want = std::max<size_t>(2 * bytes, 4096);
    SINEW_CUDA_RETURN(cudaHostAlloc(&sampled_host_, want, cudaHostAllocDefault));
    sampled_host_bytes_ = want;
    return Status::Ok();
  }

  Scratch weight_scratch_, act_scratch_, argmax_scratch_, sample_scratch_;
  void* sampled_host_ = nullptr;  // pinned
  size_t sampled_host_bytes_ = 0;
  cudaEvent_t sampled_ready_ = nullptr;
  int64_t n_sampled_ = 0;  // entries of the last QueueSampleRows
  bool row_invariant_ = false;
  StepGraphs graphs_;
  Scratch slots_[kSlots];
  std::vector<uint8_t> shadow_[kSlots];  // what each slot holds (empty: unknown)
  std::vector<int32_t> tables_, table_start_;  // UploadKvBatch's host arrays
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::unique_ptr<Context> ctx, std::string name)
      : ctx_(std::move(ctx)), name_(std::move(name)), memory_(*ctx_), ops_(*ctx_) {}
  std::string_view name() const override { return name_; }
  std::string device() const override { return "cuda:" + std::to_string(ctx_->device); }
  BackendMemory& memory() override { return memory_; }
  BackendOps& ops() override { return ops_; }

 private:
  std::unique_ptr<Context> ctx_;
  std::string name_;
  DeviceMemory memory_;
  CudaOps ops_;
};

}  // namespace
}  // namespace cuda

Result<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  using cuda::CudaStatus;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return Status::Unavailable(
        "no CUDA device: cudaGetDeviceCount: " +
        std::string(err != cudaSuccess ? cudaGetErrorString(err) : "0 devices"));
  }
  if (options.device < 0 || options.device >= count) {
    return Status::Unavailable("no CUDA device cuda:" + std::to_string(options.device) + " (" +
                               std::to_string(count) + " present)");
  }
  auto ctx = std::make_unique<cuda::Context>();
  ctx->device = options.device;
  SINEW_RETURN_IF_ERROR(ctx->Use());
  cudaDeviceProp prop{};
  SINEW_RETURN_IF_ERROR(
      CudaStatus("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, options.device)));
  SINEW_RETURN_IF_ERROR(CudaStatus("cudaStreamCreateWithFlags",
                                   cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)));
  SINEW_RETURN_IF_ERROR(cuda::CublasStatus("cublasCreate", cublasCreate(&ctx->cublas)));
  SINEW_RETURN_IF_ERROR(
      cuda::CublasStatus("cublasSetStream", cublasSetStream(ctx->cublas, ctx->stream)));
  SINEW_RETURN_IF_ERROR(CudaStatus("cudaMallocHost",
                                   cudaMallocHost(&ctx->staging, cuda::kStagingBytes)));
  ctx->staging_bytes = cuda::kStagingBytes;
  constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
  SINEW_RETURN_IF_ERROR(CudaStatus("cudaMalloc (cuBLAS workspace)",
                                   cudaMalloc(&ctx->cublas_workspace, kCublasWorkspaceBytes)));
  SINEW_RETURN_IF_ERROR(cuda::CublasStatus(
      "cublasSetWorkspace",
      cublasSetWorkspace(ctx->cublas, ctx->cublas_workspace, kCublasWorkspaceBytes)));
  const std::string name = "cuda-sm" + std::to_string(prop.major * 10 + prop.minor);
  return std::unique_ptr<Backend>(std::make_unique<cuda::CudaBackend>(std::move(ctx), name));
}

}  // namespace sinew::model
