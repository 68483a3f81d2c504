#include "backend/cpu/gemm.h"

// GCC 12 flags its own AVX-512 intrinsics (_mm512_setzero_ps, _mm512_undefined) as using
// uninitialised values; the warnings are false and would bury real ones.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "core/bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::cpu {

namespace {

inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  uint32_t s = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    if (m == 0) {
      u = s;
    } else {  // subnormal: normalise
      e = 113;
      while (!(m & 0x400)) m <<= 1, e--;
      u = s | (e << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31) {
    u = s | 0x7f800000u | (m << 13);
  } else {
    u = s | ((e + 112) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

template <WType WT>
inline float load1(const void* base, int64_t i) {
  if constexpr (WT == WType::kBF16) return bf16_to_float(static_cast<const bf16*>(base)[i]);
  if constexpr (WT == WType::kF16) return half_to_float(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

#if defined(__AVX512F__)
constexpr int kW = 16;
using vf = __m512;
inline vf vzero() {
  return _mm512_setzero_ps();
}
inline vf vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline vf vfma(vf a, vf b, vf c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline float vsum(vf a) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
template <WType WT>
inline vf wload(const void* base, int64_t i) {
  if constexpr (WT == WType::kBF16) {
    __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (WT == WType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kW = 8;
using vf = __m256;
inline vf vzero() {
  return _mm256_setzero_ps();
}
inline vf vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline vf vfma(vf a, vf b, vf c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline float vsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
template <WType WT>
inline vf wload(const void* base, int64_t i) {
  if constexpr (WT == WType::kBF16) {
    __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else if constexpr (WT == WType::kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  }
}
#else
constexpr int kW = 1;
using vf = float;
inline vf vzero() {
  return 0.0f;
}
inline vf vload(const float* p) {
  return *p;
}
inline vf vfma(vf a, vf b, vf c) {
  return a * b + c;
}
inline float vsum(vf a) {
  return a;
}
template <WType WT>
inline vf wload(const void* base, int64_t i) {
  return load1<WT>(base, i);
}
#endif

// MT rows of X against NT rows of W: acc[m][n] = sum_k x[m][k] * w[n][k].
template <WType WT, int MT, int NT, bool kPrefetch = false>
inline void tile(const float* x, int64_t ldx, const void* w, int64_t k, int64_t n0, float* y,
                 int64_t ldy, bool accumulate) {
  // Software prefetch 512 bytes ahead in each weight row: with 8 rows in flight the
  // hardware prefetchers alone reach ~65% of the read bandwidth on a GEMV, this ~85%.
  constexpr int64_t kAhead = 512 / int64_t(WT == WType::kF32 ? 4 : 2);
  const char* wb = static_cast<const char*>(w);
  (void)wb;
  vf acc[MT][NT];
  for (int m = 0; m < MT; ++m)
    for (int n = 0; n < NT; ++n) acc[m][n] = vzero();
  const int64_t kv = k / kW * kW;
  for (int64_t kk = 0; kk < kv; kk += kW) {
    if constexpr (kPrefetch)
      for (int n = 0; n < NT; ++n)
        __builtin_prefetch(wb + ((n0 + n) * k + kk + kAhead) * int64_t(WT == WType::kF32 ? 4 : 2),
                           0, 3);
    vf wv[NT];
    for (int n = 0; n < NT; ++n) wv[n] = wload<WT>(w, (n0 + n) * k + kk);
    for (int m = 0; m < MT; ++m) {
      vf xv = vload(x + m * ldx + kk);
      for (int n = 0; n < NT; ++n) acc[m][n] = vfma(xv, wv[n], acc[m][n]);
    }
  }
  for (int m = 0; m < MT; ++m)
    for (int n = 0; n < NT; ++n) {
      float s = vsum(acc[m][n]);
      for (int64_t kk = kv; kk < k; ++kk) s += x[m * ldx + kk] * load1<WT>(w, (n0 + n) * k + kk);
      float& out = y[m * ldy + n0 + n];
      out = accumulate ? out + s : s;
    }
}

template <WType WT, int MT>
void rows_block(const float* x, int64_t ldx, const void* w, int64_t k, int64_t nb, int64_t ne,
                float* y, int64_t ldy, bool acc) {
  int64_t n = nb;
  if constexpr (MT == 1)  // GEMV: memory bound, 8 rows in flight with prefetch
    for (; n + 8 <= ne; n += 8) tile<WT, 1, 8, true>(x, ldx, w, k, n, y, ldy, acc);
  for (; n + 4 <= ne; n += 4) tile<WT, MT, 4>(x, ldx, w, k, n, y, ldy, acc);
  for (; n < ne; ++n) tile<WT, MT, 1>(x, ldx, w, k, n, y, ldy, acc);
}

template <WType WT>
void matmul_t(const float* x, int64_t t, int64_t ldx, const WeightRef& w, float* y, int64_t ldy,
              ThreadPool& pool, bool acc) {
  // Split the weight rows across threads; each thread walks all rows of X for its slice,
  // 4 at a time, so a slice of W is read from memory once per 4 rows of X... and from the
  // cache for the rest (slices of 64 rows fit in L2 for K up to ~8k).
  constexpr int64_t kSlice = 64;
  pool.parallel_for(w.n, 16, [&](int64_t nb, int64_t ne, int) {
    for (int64_t s = nb; s < ne; s += kSlice) {
      int64_t se = std::min(ne, s + kSlice);
      int64_t r = 0;
      for (; r + 4 <= t; r += 4)
        rows_block<WT, 4>(x + r * ldx, ldx, w.data, w.k, s, se, y + r * ldy, ldy, acc);
      switch (t - r) {
        case 3:
          rows_block<WT, 3>(x + r * ldx, ldx, w.data, w.k, s, se, y + r * ldy, ldy, acc);
          break;
        case 2:
          rows_block<WT, 2>(x + r * ldx, ldx, w.data, w.k, s, se, y + r * ldy, ldy, acc);
          break;
        case 1:
          rows_block<WT, 1>(x + r * ldx, ldx, w.data, w.k, s, se, y + r * ldy, ldy, acc);
          break;
        default:
          break;
      }
    }
  });
}

}  // namespace

void matmul(const float* x, int64_t t, int64_t ldx, const WeightRef& w, float* y, int64_t ldy,
            ThreadPool& pool, bool accumulate) {
  if (t <= 0 || w.n <= 0) return;
  switch (w.type) {
    case WType::kBF16:
      matmul_t<WType::kBF16>(x, t, ldx, w, y, ldy, pool, accumulate);
      break;
    case WType::kF16:
      matmul_t<WType::kF16>(x, t, ldx, w, y, ldy, pool, accumulate);
      break;
    case WType::kF32:
      matmul_t<WType::kF32>(x, t, ldx, w, y, ldy, pool, accumulate);
      break;
  }
}

void weight_row(const WeightRef& w, int64_t row, float* out) {
  for (int64_t i = 0; i < w.k; ++i) {
    switch (w.type) {
      case WType::kBF16:
        out[i] = load1<WType::kBF16>(w.data, row * w.k + i);
        break;
      case WType::kF16:
        out[i] = load1<WType::kF16>(w.data, row * w.k + i);
        break;
      case WType::kF32:
        out[i] = load1<WType::kF32>(w.data, row * w.k + i);
        break;
    }
  }
}

}  // namespace tandem::cpu
