#pragma once
// FP8 E4M3 ("e4m3fn": 4 exponent bits, bias 7, 3 mantissa bits, no infinities, 0x7f/0xff
// NaN, largest finite 448) on the host, and the rule the FP8 KV cache stores vectors with.
// Encoding rounds to nearest even and saturates to +-448, as the GPU's
// cvt.rn.satfinite.e4m3x2.f32 does, so host and device agree bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tandem {

constexpr float kFp8E4m3Max = 448.0f;

inline float fp8_e4m3_to_float(uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  float v;
  if (e == 15 && m == 7)
    v = NAN;
  else if (e == 0)
    v = std::ldexp(float(m), -9);  // subnormal: m * 2^-9
  else
    v = std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return (c & 0x80) ? -v : v;
}

inline uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return sign | 0x7e;  // satfinite (464 and up would round past 448)
  int code;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 rounds up to the first normal)
    code = int(std::nearbyint(a * 512.0f));
  } else {
    int e;
    const float f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
    // a = (1 + m/8) * 2^(e-1): m = (2f - 1) * 8, rounded to even (exact float math).
    int m = int(std::nearbyint((2.0f * f - 1.0f) * 8.0f));
    int be = e - 1 + 7;
    if (m == 8) {
      m = 0;
      ++be;
    }
    code = (be << 3) | m;
    if (code > 0x7e) code = 0x7e;
  }
  return uint8_t(sign | code);
}

// The FP8 KV cache holds each (token, KV head) vector of n values as n e4m3 codes and one
// fp32 scale s = amax / 448 (amax: the largest |x_i|): q_i = e4m3(x_i * (448 / amax)),
// read back as q_i * s. An all-zero vector (or one below 1e-30) has zero codes. The CUDA
// kernels apply the same arithmetic (src/backend/cuda/kv_fp8.cuh).
inline float kv_fp8_quantize(const float* x, int n, uint8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float inv = amax >= 1e-30f ? kFp8E4m3Max / amax : 0.0f;  // else 448/amax overflows
  for (int i = 0; i < n; ++i) q[i] = float_to_fp8_e4m3(x[i] * inv);
  return amax / kFp8E4m3Max;
}

}  // namespace tandem
