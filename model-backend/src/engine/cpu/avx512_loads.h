// Loads shared by the AVX-512 kernel files (kernels_avx512*.cc): 16 floats from a row
// of F32, F16 or BF16 values, one value, the mask of a row's partial last step, and the
// always-inline marker. Include only from files compiled with the AVX-512 -m flags
// (engine CMakeLists.txt); internal linkage throughout.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/kernels.h"  // the quant helpers (BF16ToF32)

#define SINEW_ALWAYS_INLINE inline __attribute__((always_inline))

namespace sinew::model::cpu {
namespace {

// F16C scalar conversion (the portable F16ToF32 branches; this does not).
inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

SINEW_ALWAYS_INLINE __m512 LoadF32x16(const void* p, int64_t i) {
  return _mm512_loadu_ps(static_cast<const float*>(p) + i);
}
SINEW_ALWAYS_INLINE __m512 LoadF16x16(const void* p, int64_t i) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
}
SINEW_ALWAYS_INLINE __m512 LoadBF16x16(const void* p, int64_t i) {
  const __m512i v = _mm512_cvtepu16_epi32(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
// A mask of the first min(count, 16) lanes (count >= 0): a row's last, partial step.
SINEW_ALWAYS_INLINE __mmask16 FirstLanes(int64_t count) {
  return count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1);
}
inline float ScalarF32(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
inline float ScalarF16(const void* p, int64_t i) { return H2F(static_cast<const uint16_t*>(p)[i]); }
inline float ScalarBF16(const void* p, int64_t i) {
  return BF16ToF32(static_cast<const uint16_t*>(p)[i]);
}

}  // namespace
}  // namespace sinew::model::cpu
