#include "quant/quants.h"

#include <algorithm>
#include <cmath>

#include "sinew/model/gguf.h"

namespace sinew::model::quant {
namespace {

void DequantQ4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[b * kQK4_0 + j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
      y[b * kQK4_0 + j + 16] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQK8_0; ++j) y[b * kQK8_0 + j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void DequantQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    const float dmin = F16ToF32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    float* out = y + b * kQKK;
    for (int pair = 0; pair < 4; ++pair) {
      uint8_t sc0, m0, sc1, m1;
      Q4KScaleMin(2 * pair, x[b].scales, &sc0, &m0);
      Q4KScaleMin(2 * pair + 1, x[b].scales, &sc1, &m1);
      for (int l = 0; l < 32; ++l) {
        out[64 * pair + l] = d * sc0 * (q[32 * pair + l] & 0xF) - dmin * m0;
        out[64 * pair + 32 + l] = d * sc1 * (q[32 * pair + l] >> 4) - dmin * m1;
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      const int8_t* sc = x[b].scales + 8 * half;
      float* out = y + b * kQKK + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * sc[is] * q1;
        out[l + 32] = d * sc[is + 2] * q2;
        out[l + 64] = d * sc[is + 4] * q3;
        out[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void QuantQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* v = x + b * kQK4_0;
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(v[j]) > amax) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(v[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(v[j + 16] * id + 8.5f));
      y[b].qs[j] = static_cast<uint8_t>(std::max(0, lo) | (std::max(0, hi) << 4));
    }
  }
}

void QuantQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* v = x + b * kQKK;
    float scales[8], mins[8];
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;  // the range always includes 0
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, v[32 * j + l]);
        hi = std::max(hi, v[32 * j + l]);
      }
      scales[j] = (hi - lo) / 15.0f;
      mins[j] = -lo;
    }
    const float max_scale = *std::max_element(scales, scales + 8);
    const float max_min = *std::max_element(mins, mins + 8);
    const float d = max_scale / 63.0f;
    const float dmin = max_min / 63.0f;
    y[b].d = F32ToF16(d);
    y[b].dmin = F32ToF16(dmin);
    const float d16 = F16ToF32(y[b].d), dmin16 = F16ToF32(y[b].dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(d16 > 0 ? std::min(63, static_cast<int>(std::lround(scales[j] / d16))) : 0);
      // Round the min up so that the smallest value stays representable.
      mn[j] = static_cast<uint8_t>(dmin16 > 0 ? std::min(63, static_cast<int>(std::ceil(mins[j] / dmin16))) : 0);
    }
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        y[b].scales[j] = sc[j];
        y[b].scales[j + 4] = mn[j];
      } else {
        y[b].scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
        y[b].scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
        y[b].scales[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
      }
    }
    for (int pair = 0; pair < 4; ++pair) {
      for (int l = 0; l < 32; ++l) {
        int q[2];
        for (int s = 0; s < 2; ++s) {
          const int j = 2 * pair + s;
          const float step = d16 * sc[j];
          const float m = dmin16 * mn[j];
          const int qi = step > 0 ? static_cast<int>(std::lround((v[32 * j + l] + m) / step)) : 0;
          q[s] = std::clamp(qi, 0, 15);
        }
        y[b].qs[32 * pair + l] = static_cast<uint8_t>(q[0] | (q[1] << 4));
      }
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* v = x + b * kQKK;
    float scales[16];
    float amax_scale = 0;
    for (int g = 0; g < 16; ++g) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(v[16 * g + l]));
      scales[g] = amax / 31.0f;
      amax_scale = std::max(amax_scale, scales[g]);
    }
    const float d = amax_scale / 127.0f;
    y[b].d = F32ToF16(d);
    const float d16 = F16ToF32(y[b].d);
    int q[kQKK];
    for (int g = 0; g < 16; ++g) {
      const int s = d16 > 0 ? std::min(127, static_cast<int>(std::lround(scales[g] / d16))) : 0;
      y[b].scales[g] = static_cast<int8_t>(s);
      const float step = d16 * static_cast<float>(s);
      for (int l = 0; l < 16; ++l) {
        const int qi = step > 0 ? static_cast<int>(std::lround(v[16 * g + l] / step)) : 0;
        q[16 * g + l] = std::clamp(qi, -32, 31) + 32;
      }
    }
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = y[b].ql + 64 * half;
      uint8_t* qh = y[b].qh + 32 * half;
      const int* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                     ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

// Round half away from zero, like lround, without the library call (activations
// are quantized on every matmul).
inline int RoundToInt(float x) { return static_cast<int>(x + (x >= 0 ? 0.5f : -0.5f)); }

}  // namespace

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* v = x + b * kQK8_0;
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(RoundToInt(v[j] * id));
  }
}

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* v = x + b * kQKK;
    float amax = 0;
    for (int j = 0; j < kQKK; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = d;
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) {
        const int q = RoundToInt(v[16 * g + l] * id);
        y[b].qs[16 * g + l] = static_cast<int8_t>(q);
        sum += q;
      }
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

void DequantizeRow(uint32_t type, const void* src, float* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t j = 0; j < n; ++j) dst[j] = F16ToF32(s[j]);
      break;
    }
    case GgmlType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t j = 0; j < n; ++j) dst[j] = BF16ToF32(s[j]);
      break;
    }
    case GgmlType::kQ4_0: DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, n); break;
    case GgmlType::kQ8_0: DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, n); break;
    case GgmlType::kQ4_K: DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, n); break;
    case GgmlType::kQ6_K: DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, n); break;
  }
}

void DequantizeSpan(uint32_t type, const void* row, int64_t start, int64_t n, float* dst) {
  const GgmlType t = static_cast<GgmlType>(type);
  const int64_t bs = GgmlBlockSize(t), block_bytes = GgmlTypeSize(t);
  float block[kQKK];
  for (int64_t b = start / bs; b * bs < start + n; ++b) {
    DequantizeRow(type, static_cast<const uint8_t*>(row) + b * block_bytes, block, bs);
    const int64_t lo = std::max(start, b * bs), hi = std::min(start + n, (b + 1) * bs);
    for (int64_t i = lo; i < hi; ++i) dst[i - start] = block[i - b * bs];
  }
}

void QuantizeRow(uint32_t type, const float* src, void* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = F32ToF16(src[j]);
      break;
    }
    case GgmlType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = F32ToBF16(src[j]);
      break;
    }
    case GgmlType::kQ4_0: QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), n); break;
    case GgmlType::kQ8_0: QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n); break;
    case GgmlType::kQ4_K: QuantQ4_K(src, static_cast<BlockQ4_K*>(dst), n); break;
    case GgmlType::kQ6_K: QuantQ6_K(src, static_cast<BlockQ6_K*>(dst), n); break;
  }
}

}  // namespace sinew::model::quant
