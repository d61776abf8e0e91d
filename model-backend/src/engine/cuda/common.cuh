// Shared device code of the CUDA backend: error plumbing and element access
// to every tensor type (the block layouts of quant/quants.h, read on the device).
//
// Every launcher in this folder returns the cudaError_t of its launch
// (cudaGetLastError()); the backend turns it into a Status naming the kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/quants.h"
#include "sinew/model/gguf.h"

namespace sinew::model::cuda {

constexpr int kWarp = 32;

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The element accessors below are also compiled for the host, where
// tests/cuda_host_test.cu checks them against the reference dequantization
// without a GPU.
__host__ __device__ __forceinline__ float HalfBits(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

__host__ __device__ __forceinline__ float Bf16Bits(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
#else
  return quant::BF16ToF32(h);
#endif
}

// Element i of a row of `type` (any of the seven types). Reads the row's
// blocks in place; per-element work is small enough for the memory-bound
// kernels that use it (GetRows, dequantization, mat-vec, the KV cache).
__host__ __device__ __forceinline__ float LoadElem(GgmlType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case GgmlType::kF32: return reinterpret_cast<const float*>(row)[i];
    case GgmlType::kF16: return HalfBits(reinterpret_cast<const uint16_t*>(row)[i]);
    case GgmlType::kBF16: return Bf16Bits(reinterpret_cast<const uint16_t*>(row)[i]);
    case GgmlType::kQ8_0: {
      const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(row) + i / quant::kQK8_0;
      return HalfBits(b->d) * static_cast<float>(b->qs[i % quant::kQK8_0]);
    }
    case GgmlType::kQ4_0: {
      const auto* b = reinterpret_cast<const quant::BlockQ4_0*>(row) + i / quant::kQK4_0;
      const int j = static_cast<int>(i % quant::kQK4_0);
      const int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
      return static_cast<float>(q - 8) * HalfBits(b->d);
    }
    case GgmlType::kQ4_K: {
      const auto* b = reinterpret_cast<const quant::BlockQ4_K*>(row) + i / quant::kQKK;
      const int w = static_cast<int>(i % quant::kQKK);
      const int pair = w / 64, hi = (w % 64) / 32, l = w % 32;
      const int j = 2 * pair + hi;
      const uint8_t* s = b->scales;
      int sc, m;
      if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
      } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      }
      const uint8_t q = b->qs[32 * pair + l];
      const int v = hi ? (q >> 4) : (q & 0xF);
      return HalfBits(b->d) * static_cast<float>(sc) * static_cast<float>(v) -
             HalfBits(b->dmin) * static_cast<float>(m);
    }
    case GgmlType::kQ6_K: {
      const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(row) + i / quant::kQKK;
      const int w = static_cast<int>(i % quant::kQKK);
      const int half = w / 128, r = w % 128, quarter = r / 32, l = r % 32;
      const uint8_t* ql = b->ql + 64 * half;
      const uint8_t* qh = b->qh + 32 * half;
      const int8_t* sc = b->scales + 8 * half;
      const int low = quarter & 1 ? ql[l + 32] : ql[l];
      const int nib = quarter >= 2 ? (low >> 4) : (low & 0xF);
      const int q = (nib | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
      return HalfBits(b->d) * static_cast<float>(sc[l / 16 + 2 * quarter]) * static_cast<float>(q);
    }
  }
  return 0.0f;
}

// Elements per mat-vec unit of a type: the piece of a row one lane dots with
// the activations in one step (a Q8_0/Q4_0 block, a Q4_K pair of sub-blocks
// sharing 32 bytes of quants, a Q6_K quarter of a half, two F16 values).
__host__ __device__ constexpr int64_t MatVecUnit(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ6_K: return 32;
    case GgmlType::kQ4_K: return 64;
    case GgmlType::kF16: return 2;
    default: return 1;
  }
}

// Dot product of unit u of a row (MatVecUnit(type) elements) with x, reading
// the quantized block in place: scales once per unit, integer quants times the
// activations. REQUIRES: the row length is a multiple of the unit; for F16 the
// row is 4-byte aligned.
__host__ __device__ __forceinline__ float DotUnit(GgmlType type, const uint8_t* row, int64_t u,
                                                  const float* x) {
  switch (type) {
    case GgmlType::kQ8_0: {
      const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(row) + u;
      const float* xs = x + u * 32;
      float sum = 0.0f;
      for (int j = 0; j < 32; ++j) sum += static_cast<float>(b->qs[j]) * xs[j];
      return HalfBits(b->d) * sum;
    }
    case GgmlType::kQ4_0: {
      const auto* b = reinterpret_cast<const quant::BlockQ4_0*>(row) + u;
      const float* xs = x + u * 32;
      float sum = 0.0f;
      for (int j = 0; j < 16; ++j) {
        sum += static_cast<float>((b->qs[j] & 0xF) - 8) * xs[j] +
               static_cast<float>((b->qs[j] >> 4) - 8) * xs[j + 16];
      }
      return HalfBits(b->d) * sum;
    }
    case GgmlType::kQ4_K: {
      const auto* b = reinterpret_cast<const quant::BlockQ4_K*>(row) + u / 4;
      const int pair = static_cast<int>(u % 4);
      const float* xs = x + u * 64;
      const uint8_t* s = b->scales;
      int sc[2], m[2];
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * pair + h;
        if (j < 4) {
          sc[h] = s[j] & 63;
          m[h] = s[j + 4] & 63;
        } else {
          sc[h] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
          m[h] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
      }
      const uint8_t* q = b->qs + 32 * pair;
      float dot0 = 0.0f, dot1 = 0.0f, sum0 = 0.0f, sum1 = 0.0f;
      for (int l = 0; l < 32; ++l) {
        dot0 += static_cast<float>(q[l] & 0xF) * xs[l];
        dot1 += static_cast<float>(q[l] >> 4) * xs[l + 32];
        sum0 += xs[l];
        sum1 += xs[l + 32];
      }
      const float d = HalfBits(b->d), dmin = HalfBits(b->dmin);
      return d * (static_cast<float>(sc[0]) * dot0 + static_cast<float>(sc[1]) * dot1) -
             dmin * (static_cast<float>(m[0]) * sum0 + static_cast<float>(m[1]) * sum1);
    }
    case GgmlType::kQ6_K: {
      const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(row) + u / 8;
      const int half = static_cast<int>(u % 8) / 4, quarter = static_cast<int>(u % 4);
      const uint8_t* ql = b->ql + 64 * half + (quarter & 1 ? 32 : 0);
      const uint8_t* qh = b->qh + 32 * half;
      const int8_t* sc = b->scales + 8 * half + 2 * quarter;
      const float* xs = x + u * 32;
      float dot[2] = {0.0f, 0.0f};
      for (int l = 0; l < 32; ++l) {
        const int nib = quarter >= 2 ? (ql[l] >> 4) : (ql[l] & 0xF);
        const int q = (nib | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
        dot[l / 16] += static_cast<float>(q) * xs[l];
      }
      return HalfBits(b->d) *
             (static_cast<float>(sc[0]) * dot[0] + static_cast<float>(sc[1]) * dot[1]);
    }
    case GgmlType::kF16: {
      const uint32_t pair = reinterpret_cast<const uint32_t*>(row)[u];
      return HalfBits(static_cast<uint16_t>(pair & 0xFFFF)) * x[2 * u] +
             HalfBits(static_cast<uint16_t>(pair >> 16)) * x[2 * u + 1];
    }
    default: return LoadElem(type, row, u) * x[u];
  }
}

// Row of a paged cache tensor holding position `pos` (see KvBlocks).
__host__ __device__ __forceinline__ int64_t KvRowIndex(const int32_t* table, int32_t block_size,
                                              int64_t pos) {
  return static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size;
}

// A batch's rows in a paged cache (KvBatch on the device): row r is at
// position positions[r] of the sequence whose block table starts at
// tables + table_start[r]. Device arrays.
struct KvRows {
  const int32_t* tables = nullptr;       // every sequence's table, back to back
  const int32_t* table_start = nullptr;  // per row
  const int32_t* positions = nullptr;    // per row
  int32_t block_size = 0;

  __host__ __device__ __forceinline__ const int32_t* Table(int64_t r) const {
    return tables + table_start[r];
  }
  // The cache row of batch row r, and of position `pos` of row r's sequence.
  __host__ __device__ __forceinline__ int64_t CacheRow(int64_t r) const {
    return KvRowIndex(Table(r), block_size, positions[r]);
  }
  __host__ __device__ __forceinline__ int64_t CacheRow(int64_t r, int64_t pos) const {
    return KvRowIndex(Table(r), block_size, pos);
  }
};

}  // namespace sinew::model::cuda
