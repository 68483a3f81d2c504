#pragma once
// FP8 E4M3 ("e4m3fn": 4 exponent bits, bias 7, 3 mantissa bits, no infinities, 0x7f/0xff
// NaN, largest finite 448) on the host, and the rule the FP8 KV cache stores vectors with.
// Encoding rounds to nearest even and saturates to +-448, as the GPU's
// cvt.rn.satfinite.e4m3x2.f32 does, so host and device agree bit for bit.
#include <algorithm>
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

namespace tandem {

// FP8 weights: a [N, K] matrix in blocks of 128 x 128 (the last ones partial), each block
// stored as e4m3 codes plus one fp32 multiplier S = amax / 448 (the checkpoints' name for it
// is weight_scale_inv): W[n, k] ~ e4m3(q[n, k]) * S[n / 128][k / 128]. Codes use the KV
// cache's rule per block: q = e4m3_rn_satfinite(w * (448 / amax)), zero codes for a block
// whose amax is below 1e-30. Scales are laid out [ceil(N / 128)][lds], lds >= ceil(K / 128)
// (the GPU pads it to a multiple of 4, as its block-scaled GEMM reads them).
constexpr int kFp8Block = 128;

inline int64_t fp8_blocks(int64_t n) {
  return (n + kFp8Block - 1) / kFp8Block;
}
// The scale row stride the GPU uses: ceil(K / 128) rounded up to a multiple of 4.
inline int64_t fp8_scale_stride(int64_t K) {
  return (fp8_blocks(K) + 3) / 4 * 4;
}

inline void fp8_block_quantize(const float* W, int64_t N, int64_t K, uint8_t* q, float* s,
                               int64_t lds) {
  for (int64_t nb = 0; nb < fp8_blocks(N); ++nb)
    for (int64_t kb = 0; kb < fp8_blocks(K); ++kb) {
      const int64_t n0 = nb * kFp8Block, n1 = std::min<int64_t>(N, n0 + kFp8Block);
      const int64_t k0 = kb * kFp8Block, k1 = std::min<int64_t>(K, k0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) amax = std::fmax(amax, std::fabs(W[n * K + k]));
      const float inv = amax >= 1e-30f ? kFp8E4m3Max / amax : 0.0f;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) q[n * K + k] = float_to_fp8_e4m3(W[n * K + k] * inv);
      s[nb * lds + kb] = amax / kFp8E4m3Max;
    }
}

// The value a block-scaled weight element reads back as.
inline float fp8_block_dequant(const uint8_t* q, const float* s, int64_t lds, int64_t K, int64_t n,
                               int64_t k) {
  return fp8_e4m3_to_float(q[n * K + k]) * s[(n / kFp8Block) * lds + k / kFp8Block];
}

}  // namespace tandem
