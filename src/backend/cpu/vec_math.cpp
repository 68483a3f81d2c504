#include "backend/cpu/vec_math.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 flags its own AVX-512 intrinsics as reading uninitialised values (false alarms).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tandem::cpu {

namespace {

// 2^f for f in [0, 1): degree-6 minimax polynomial.
constexpr float kP[7] = {1.0f,
                         6.931472028550421e-1f,
                         2.402264791363012e-1f,
                         5.550332471162809e-2f,
                         9.618437357674640e-3f,
                         1.339887440266574e-3f,
                         1.535336188319500e-4f};
constexpr float kLog2e = 1.44269504088896341f;

inline float exp_scalar(float x) {
  if (std::isnan(x)) return x;
  x = std::max(x, -87.0f);
  float t = x * kLog2e, i = std::floor(t), f = t - i;
  float p = kP[6];
  for (int k = 5; k >= 0; --k) p = p * f + kP[k];
  return std::ldexp(p, int(i));
}

#if defined(__AVX512F__)
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));  // NaN in x: max returns the second operand
  __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(kLog2e));
  __m512 i = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(t, i);
  __m512 p = _mm512_set1_ps(kP[6]);
  for (int k = 5; k >= 0; --k) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP[k]));
  return _mm512_scalef_ps(p, i);
}
#endif

}  // namespace

float max_value(std::span<const float> x) {
  float m = -std::numeric_limits<float>::infinity();
  size_t i = 0;
#if defined(__AVX512F__)
  __m512 vm = _mm512_set1_ps(m);
  for (; i + 16 <= x.size(); i += 16) vm = _mm512_max_ps(_mm512_loadu_ps(&x[i]), vm);
  m = _mm512_reduce_max_ps(vm);
#endif
  for (; i < x.size(); ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double sum_exp(std::span<const float> x, float m, float s) {
  double total = 0;
  size_t i = 0;
  bool nan = false;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps(), vm = _mm512_set1_ps(m), vs = _mm512_set1_ps(s);
  __mmask16 bad = 0;
  for (; i + 16 <= x.size(); i += 16) {
    __m512 v = _mm512_loadu_ps(&x[i]);
    bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    acc = _mm512_add_ps(acc, exp16(_mm512_mul_ps(_mm512_sub_ps(v, vm), vs)));
  }
  nan = bad != 0;
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  for (float l : lanes) total += l;
#endif
  for (; i < x.size(); ++i) {
    nan |= std::isnan(x[i]);
    total += exp_scalar((x[i] - m) * s);
  }
  return nan ? std::numeric_limits<double>::quiet_NaN() : total;
}

float dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float s = 0;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  s = _mm512_reduce_add_ps(acc);
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float s, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];  // element-wise: the compiler vectorises
}

int64_t argmax(std::span<const float> x) {
  if (x.empty()) return -1;
  // Find the maximum vectorised, then the first index holding it.
  float m = max_value(x);
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] == m) return int64_t(i);
  return 0;  // every entry NaN
}

}  // namespace tandem::cpu
