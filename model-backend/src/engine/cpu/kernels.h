// The CPU kernel table: one function pointer per inner loop, filled by the
// scalar, AVX2 and AVX-512 translation units and chosen once at run time.
//
// Activation formats: F32/F16/BF16 weights take F32 activations; Q8_0 and
// Q4_0 weights take activations quantized to Q8_0 blocks; Q4_K and Q6_K
// weights take activations quantized to Q8_K blocks.
#pragma once

#include <cstdint>

#include "quant/quants.h"

namespace sinew::model::cpu {

// The kernels work on the shared block layouts (quant/quants.h).
using namespace ::sinew::model::quant;  // NOLINT(google-build-using-namespace)

enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// Dot product of one weight row (n elements, in its own type) with one
// activation row (in the weight type's activation format).
using VecDotFn = float (*)(int64_t n, const void* w, const void* x);
// A tile of a matrix product: out[c * out_stride + r] = dot(weight row r, activation
// row c) for r < rows_w weight rows (w_stride bytes apart) and c < rows_x activation
// rows (x_stride bytes apart), 1 <= rows_w, rows_x <= kTileRows. Every element gets
// the same arithmetic whatever the tile's shape (one accumulator per element over the
// row, in the same order), so a matrix product built of tiles is batch invariant.
inline constexpr int kTileRows = 4;
using GemmTileFn = void (*)(int64_t n, const void* w, int64_t w_stride, int rows_w, const void* x,
                            int64_t x_stride, int rows_x, float* out, int64_t out_stride);
// The activation layout of tile_q8_0: per pair of 32-value blocks, 64 quants (offset to
// unsigned, q + 128, for AVX-512's vpdpbusd; signed for AVX2) and 16 float scales (the
// first block's 8 times, then the second's); a last unpaired block has zero quants and
// scales in its second half. Each level's quantize_q8_0_tile writes its own tile's.
inline constexpr int64_t Q8TileActRowBytes(int64_t n) { return (n / 32 + 1) / 2 * 128; }
// Converts n F32 values to an activation format.
using QuantizeActFn = void (*)(const float* x, void* y, int64_t n);
// y[i] += a * x[i] where x is F32 or F16 (for attention over the V cache).
using AxpyFn = void (*)(int64_t n, float a, const void* x, float* y);
// Attention's values for a group of heads, rows_v >= 1 value rows (n elements each,
// v_stride bytes apart, e.g. a KV block's run of keys) at a time: for each head
// g < heads and each row j in order, o[g * o_stride + i] += p[g * p_stride + j] * v_j[i].
// Each element gets the arithmetic of the AxpyFn of the same type called row after
// row, so the result is that of the one-row-at-a-time loop, bit for bit, however the
// rows are split into calls.
using AttnValuesFn = void (*)(int64_t n, const void* v, int64_t v_stride, int rows_v,
                              const float* p, int64_t p_stride, int heads, float* o,
                              int64_t o_stride);

// Attention's softmax numerators over one head's scores: p[j] = exp(p[j] * scale - m)
// for j < n, m the largest p[j] * scale; returns their sum. Every row of a given n gets
// the same arithmetic (batch invariance holds).
using SoftmaxFn = float (*)(float* p, int64_t n, float scale);

struct KernelTable {
  SimdLevel level = SimdLevel::kScalar;
  const char* name = "scalar";
  VecDotFn dot_f32 = nullptr;
  VecDotFn dot_f16 = nullptr;  // F16 weights, F32 activations
  VecDotFn dot_bf16 = nullptr;
  VecDotFn dot_q8_0 = nullptr;
  VecDotFn dot_q4_0 = nullptr;
  VecDotFn dot_q4_k = nullptr;
  VecDotFn dot_q6_k = nullptr;
  // Optional register-tiled matrix products; when set, MatMul uses them for every
  // batch size instead of dot (so the results differ from dot's in rounding).
  GemmTileFn tile_f32 = nullptr;
  GemmTileFn tile_f16 = nullptr;
  GemmTileFn tile_bf16 = nullptr;
  GemmTileFn tile_q8_0 = nullptr;  // Q8_0 and Q4_0 take activations from quantize_q8_0_tile
  GemmTileFn tile_q4_0 = nullptr;
  GemmTileFn tile_q4_k = nullptr;  // Q4_K and Q6_K take Q8_K activations (quantize_q8_k)
  GemmTileFn tile_q6_k = nullptr;
  // The weight rows per call (rows_w) with which tile_f32, tile_f16 and tile_bf16 run
  // fastest over a full matrix (each shape gives the same bits).
  int float_tile_rows_w = kTileRows;
  QuantizeActFn quantize_q8_0_tile = nullptr;
  QuantizeActFn quantize_q8_0 = nullptr;
  QuantizeActFn quantize_q8_k = nullptr;
  AxpyFn axpy_f32 = nullptr;
  AxpyFn axpy_f16 = nullptr;
  SoftmaxFn softmax = nullptr;
  AttnValuesFn attn_values_f32 = nullptr;
  AttnValuesFn attn_values_f16 = nullptr;
};

// Each fills the entries it accelerates and leaves the others as they are.
void FillScalarKernels(KernelTable* table);
void FillAvx2Kernels(KernelTable* table);
void FillAvx512Kernels(KernelTable* table);
// The tile entries of FillAvx2Kernels: float, Q8_0 and Q4_0 (kernels_avx2_tiles.cc) and
// K-quant ones (kernels_avx2_kquants.cc).
void FillAvx2TileKernels(KernelTable* table);
void FillAvx2KQuantKernels(KernelTable* table);
// The attention entries of FillAvx512Kernels (kernels_avx512_attention.cc).
void FillAvx512AttentionKernels(KernelTable* table);
// The K-quant tile entries of FillAvx512Kernels (kernels_avx512_kquants.cc).
void FillAvx512KQuantKernels(KernelTable* table);

// Whether this CPU runs the AVX2 (AVX2, FMA, F16C) or AVX-512 (F, BW, VL, VNNI) kernels.
// SINEW_CPU_LEVEL=scalar|avx2|avx512 in the environment caps what the CPU is taken to
// have, so that a machine with AVX-512 measures and tests the AVX2 path as an AVX2-only
// CPU would run it (a level the CPU lacks is never claimed).
bool CpuHasAvx2();
bool CpuHasAvx512();
// The cap SINEW_CPU_LEVEL asks for into *cap (kAvx512 when unset); false when the value
// is none of scalar, avx2, avx512 (then no SIMD level is claimed).
bool CpuLevelCap(SimdLevel* cap);

// The table for `level`: scalar entries overlaid by AVX2, then AVX-512 ones.
KernelTable MakeKernelTable(SimdLevel level);

}  // namespace sinew::model::cpu
