// Scalar kernels: the reference every SIMD kernel is tested against, and the
// fallback on CPUs without AVX2.
#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

float DotF32(int64_t n, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float DotF16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const float* b = static_cast<const float*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += F16ToF32(a[i]) * b[i];
  return sum;
}

float DotBF16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const float* b = static_cast<const float*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += BF16ToF32(a[i]) * b[i];
  return sum;
}

float DotQ8_0(int64_t n, const void* w, const void* x) {
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t blk = 0; blk < n / kQK8_0; ++blk) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += a[blk].qs[j] * b[blk].qs[j];
    sum += F16ToF32(a[blk].d) * F16ToF32(b[blk].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotQ4_0(int64_t n, const void* w, const void* x) {
  const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t blk = 0; blk < n / kQK4_0; ++blk) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((a[blk].qs[j] & 0xF) - 8) * b[blk].qs[j];
      isum += ((a[blk].qs[j] >> 4) - 8) * b[blk].qs[j + 16];
    }
    sum += F16ToF32(a[blk].d) * F16ToF32(b[blk].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotQ4_K(int64_t n, const void* w, const void* x) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      Q4KScaleMin(j, a[blk].scales, &sc, &m);
      const int pair = j / 2;
      const int shift = (j % 2) * 4;
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        dot += ((a[blk].qs[32 * pair + l] >> shift) & 0xF) * b[blk].qs[32 * j + l];
      }
      sumi += sc * dot;
      summ += m * (b[blk].bsums[2 * j] + b[blk].bsums[2 * j + 1]);
    }
    sum += b[blk].d * (F16ToF32(a[blk].d) * static_cast<float>(sumi) -
                       F16ToF32(a[blk].dmin) * static_cast<float>(summ));
  }
  return sum;
}

float DotQ6_K(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    int8_t q[kQKK];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = a[blk].ql + 64 * half;
      const uint8_t* qh = a[blk].qh + 32 * half;
      int8_t* out = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * g + l] * b[blk].qs[16 * g + l];
      sumi += a[blk].scales[g] * dot;
    }
    sum += F16ToF32(a[blk].d) * b[blk].d * static_cast<float>(sumi);
  }
  return sum;
}

void QuantizeQ8_0(const float* x, void* y, int64_t n) {
  QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(y), n);
}
void QuantizeQ8_K(const float* x, void* y, int64_t n) {
  QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(y), n);
}

void AxpyF32(int64_t n, float a, const void* x, float* y) {
  const float* v = static_cast<const float*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] += a * v[i];
}
void AxpyF16(int64_t n, float a, const void* x, float* y) {
  const uint16_t* v = static_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] += a * F16ToF32(v[i]);
}

}  // namespace

float Softmax(float* p, int64_t n, float scale) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    p[j] *= scale;
    max_score = std::max(max_score, p[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - max_score);
    sum += p[j];
  }
  return sum;
}

void FillScalarKernels(KernelTable* t) {
  t->dot_f32 = DotF32;
  t->dot_f16 = DotF16;
  t->dot_bf16 = DotBF16;
  t->dot_q8_0 = DotQ8_0;
  t->dot_q4_0 = DotQ4_0;
  t->dot_q4_k = DotQ4_K;
  t->dot_q6_k = DotQ6_K;
  t->quantize_q8_0 = QuantizeQ8_0;
  t->quantize_q8_k = QuantizeQ8_K;
  t->axpy_f32 = AxpyF32;
  t->axpy_f16 = AxpyF16;
  t->softmax = Softmax;
}

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
static bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool CpuLevelCap(SimdLevel* cap) {
  const char* env = std::getenv("SINEW_CPU_LEVEL");
  *cap = SimdLevel::kAvx512;
  if (env == nullptr || *env == '\0' || std::strcmp(env, "avx512") == 0) return true;
  if (std::strcmp(env, "avx2") == 0) {
    *cap = SimdLevel::kAvx2;
    return true;
  }
  *cap = SimdLevel::kScalar;
  return std::strcmp(env, "scalar") == 0;
}

static bool CappedAt(SimdLevel level) {
  SimdLevel cap;
  CpuLevelCap(&cap);
  return cap < level;
}

bool CpuHasAvx2() {
  if (CappedAt(SimdLevel::kAvx2)) return false;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c();
}

bool CpuHasAvx512() {
  if (CappedAt(SimdLevel::kAvx512)) return false;
  return CpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

KernelTable MakeKernelTable(SimdLevel level) {
  KernelTable t;
  FillScalarKernels(&t);
  if (level >= SimdLevel::kAvx2) {
    FillAvx2Kernels(&t);
    t.level = SimdLevel::kAvx2;
    t.name = "avx2";
  }
  if (level >= SimdLevel::kAvx512) {
    FillAvx512Kernels(&t);
    t.level = SimdLevel::kAvx512;
    t.name = "avx512";
  }
  return t;
}

}  // namespace sinew::model::cpu
