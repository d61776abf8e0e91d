// Backend helpers shared by every backend: host buffers, op names and the
// device-string factory. The CUDA factory lives in cuda/cuda_backend.cu when the build has
// CUDA (SINEW_HAVE_CUDA), and is a stub here otherwise.
#include <charconv>
#include <cstring>
#include <string>

#include "sinew/model/backend.h"

#include <algorithm>
#include <cmath>

namespace sinew::model {

std::pair<float, float> YarnCorrDims(int32_t n_rot, int32_t n_ctx_orig, float freq_base,
                                     float beta_fast, float beta_slow) {
  // Float arithmetic as ggml's, so the rounded range is the same.
  auto dim = [&](float rotations) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(freq_base));
  };
  const float low = std::floor(dim(beta_fast));
  const float high = std::ceil(dim(beta_slow));
  return {std::max(0.0f, low), std::min(static_cast<float>(n_rot - 1), high)};
}

Status BackendBuffer::ReadMany(std::span<const HostCopy> copies) const {
  for (const HostCopy& c : copies) SINEW_RETURN_IF_ERROR(Read(c.offset, c.host, c.n));
  return Status::Ok();
}

Status BackendBuffer::WriteMany(std::span<const HostCopy> copies) {
  for (const HostCopy& c : copies) SINEW_RETURN_IF_ERROR(Write(c.offset, c.host, c.n));
  return Status::Ok();
}

Status BackendBuffer::CheckRange(size_t offset, size_t n, const char* what) const {
  if (offset <= size() && n <= size() - offset) return Status::Ok();
  return Status::OutOfRange(std::string("buffer ") + what + " out of range");
}

Status HostMemoryBuffer::Write(size_t offset, const void* src, size_t n) {
  SINEW_RETURN_IF_ERROR(CheckRange(offset, n, "write"));
  std::memcpy(static_cast<uint8_t*>(data_) + offset, src, n);
  return Status::Ok();
}

Status HostMemoryBuffer::Read(size_t offset, void* dst, size_t n) const {
  SINEW_RETURN_IF_ERROR(CheckRange(offset, n, "read"));
  std::memcpy(dst, static_cast<const uint8_t*>(data_) + offset, n);
  return Status::Ok();
}

Status CheckKvBatch(const KvBatch& batch, std::span<const int32_t> positions, int64_t rows,
                    int64_t cache_rows) {
  if (batch.block_size < 1) return Status::InvalidArgument("KV batch: block_size below 1");
  if (static_cast<int64_t>(positions.size()) < rows) {
    return Status::InvalidArgument("KV batch: " + std::to_string(positions.size()) +
                                   " positions for " + std::to_string(rows) + " rows");
  }
  const int64_t cache_blocks = cache_rows / batch.block_size;
  int64_t r = 0;
  for (const KvSeq& seq : batch.seqs) {
    if (seq.n_rows < 0 || seq.n_rows > rows - r) {
      return Status::InvalidArgument("KV batch: the sequences have more rows than the batch");
    }
    for (const int32_t block : seq.table) {
      if (block < 0 || block >= cache_blocks) {
        return Status::InvalidArgument("KV batch: block " + std::to_string(block) +
                                       " outside a cache of " + std::to_string(cache_blocks));
      }
    }
    for (int64_t end = r + seq.n_rows; r < end; ++r) {
      const int32_t pos = positions[static_cast<size_t>(r)];
      if (pos < 0 || pos / batch.block_size >= static_cast<int64_t>(seq.table.size())) {
        return Status::InvalidArgument("KV batch: position " + std::to_string(pos) + " of row " +
                                       std::to_string(r) + " is outside its block table");
      }
    }
  }
  if (r != rows) {
    return Status::InvalidArgument("KV batch: the sequences have " + std::to_string(r) +
                                   " rows, the batch " + std::to_string(rows));
  }
  return Status::Ok();
}

Status CheckGetRowsIds(std::span<const int32_t> ids, int64_t table_rows, int64_t n_fed) {
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id >= 0 ? id >= table_rows : FedToken(id) >= n_fed) {
      return Status::InvalidArgument(
          "GetRows: id " + std::to_string(i) + " is " +
          (id >= 0 ? "row " + std::to_string(id) + " of a table of " + std::to_string(table_rows)
                   : "entry " + std::to_string(FedToken(id)) + " of a sample of " +
                         std::to_string(n_fed)));
    }
  }
  return Status::Ok();
}

Status CheckRowSampling(std::span<const RowSampling> rows, int64_t n_rows, int64_t n_vocab,
                        std::span<const uint32_t> masks, size_t out_size) {
  if (out_size < rows.size()) {
    return Status::InvalidArgument("SampleRows: " + std::to_string(rows.size()) +
                                   " rows but room for " + std::to_string(out_size) + " tokens");
  }
  const int64_t words = MaskWords(n_vocab);
  if (words == 0 || static_cast<int64_t>(masks.size()) % words != 0) {
    return Status::InvalidArgument("SampleRows: masks are not whole masks of " +
                                   std::to_string(words) + " words");
  }
  const int64_t n_masks = static_cast<int64_t>(masks.size()) / words;
  std::vector<bool> taken(static_cast<size_t>(std::max<int64_t>(n_rows, 0)), false);
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowSampling& r = rows[i];
    auto bad = [i](const std::string& what) {
      return Status::InvalidArgument("SampleRows: entry " + std::to_string(i) + ": " + what);
    };
    if (r.row < 0 || r.row >= n_rows) {
      return bad("row " + std::to_string(r.row) + " outside the " + std::to_string(n_rows) +
                 " rows of logits");
    }
    if (taken[static_cast<size_t>(r.row)]) {
      return bad("row " + std::to_string(r.row) + " is sampled twice");
    }
    taken[static_cast<size_t>(r.row)] = true;
    if (r.mask < -1 || r.mask >= n_masks) {
      return bad("mask " + std::to_string(r.mask) + " outside the " + std::to_string(n_masks) +
                 " masks");
    }
    if (!(r.temperature >= 0 && r.temperature <= 100)) return bad("temperature outside [0, 100]");
    if (r.top_k < 0) return bad("top_k below 0");
    if (!(r.top_p > 0 && r.top_p <= 1)) return bad("top_p outside (0, 1]");
    if (!(r.min_p >= 0 && r.min_p <= 1)) return bad("min_p outside [0, 1]");
    if (!(r.u >= 0 && r.u < 1)) return bad("u outside [0, 1)");
  }
  return Status::Ok();
}

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kGetRows: return "GetRows";
    case Op::kMatMul: return "MatMul";
    case Op::kAddBias: return "AddBias";
    case Op::kAdd: return "Add";
    case Op::kRmsNorm: return "RmsNorm";
    case Op::kRope: return "Rope";
    case Op::kSwiGlu: return "SwiGlu";
    case Op::kStoreKv: return "StoreKv";
    case Op::kAttention: return "Attention";
    case Op::kArgmax: return "Argmax";
    case Op::kSampleRows:
      return "SampleRows";
  }
  return "unknown";
}

#ifndef SINEW_HAVE_CUDA
bool HaveCudaBackend() { return false; }

Result<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions&) {
  return Status::Unimplemented(
      "this build has no CUDA backend (configure with SINEW_CUDA=ON and the CUDA Toolkit)");
}
#endif

Result<std::unique_ptr<Backend>> CreateBackendForDevice(std::string_view device,
                                                        const CpuBackendOptions& cpu) {
  if (device == "cpu") return CreateCpuBackend(cpu);
  if (device == "cuda") return CreateCudaBackend(CudaBackendOptions{});
  if (device.starts_with("cuda:")) {
    const std::string_view digits = device.substr(5);
    int32_t ordinal = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
        ordinal >= 0 && ordinal < 64) {
      return CreateCudaBackend(CudaBackendOptions{ordinal});
    }
  }
  return Status::InvalidArgument("unknown device '" + std::string(device) +
                                 "' (expected cpu, cuda or cuda:N)");
}

}  // namespace sinew::model
