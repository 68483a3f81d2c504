#include "backend/cpu/ops.h"

#include "backend/cpu/vec_math.h"
#include "core/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tandem::cpu {

void embedding(std::span<const int32_t> ids, const WeightRef& table, float* out) {
  for (size_t t = 0; t < ids.size(); ++t) weight_row(table, ids[t], out + int64_t(t) * table.k);
}

void rmsnorm(const float* x, int64_t rows, int64_t d, int64_t ld, const WeightRef& weight,
             double eps, float* y, int64_t ldy) {
  std::vector<float> w(size_t(weight.k));
  weight_row(weight, 0, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld;
    float* yr = y + r * ldy;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * xr[i];
    float inv = float(1.0 / std::sqrt(ss / double(d) + eps));
    for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * inv) * w[size_t(i)];
  }
}

void rope(float* x, int64_t t, int64_t heads, int64_t d, int64_t ld,
          std::span<const int32_t> positions, std::span<const float> inv_freq, float scale) {
  const int64_t half = d / 2;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
  for (int64_t r = 0; r < t; ++r) {
    const float pos = float(positions[size_t(r)]);
    for (int64_t i = 0; i < half; ++i) {
      float f = pos * inv_freq[size_t(i)];  // fp32 angle, as the reference computes it
      c[size_t(i)] = float(std::cos(double(f))) * scale;
      s[size_t(i)] = float(std::sin(double(f))) * scale;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * ld + h * d;
      for (int64_t i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * c[size_t(i)] - b * s[size_t(i)];
        v[i + half] = b * c[size_t(i)] + a * s[size_t(i)];
      }
    }
  }
}

void silu_mul(const float* gate_up, int64_t t, int64_t inter, float* out) {
  for (int64_t r = 0; r < t; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void kv_store(const PagedKv& kv, const float* k, int64_t ldk, const float* v, int64_t ldv,
              std::span<const int64_t> slots) {
  const int64_t n = kv.slot_floats();
  std::vector<uint8_t> codes(size_t(kv.head_dim));
  // Each head's vector as FP8 holds it: codes with one scale, read back as code * scale.
  auto fp8_round_trip = [&](const float* src, float* dst) {
    for (int64_t h = 0; h < kv.kv_heads; ++h) {
      const float s = kv_fp8_quantize(src + h * kv.head_dim, int(kv.head_dim), codes.data());
      for (int64_t i = 0; i < kv.head_dim; ++i)
        dst[h * kv.head_dim + i] = fp8_e4m3_to_float(codes[size_t(i)]) * s;
    }
  };
  for (size_t t = 0; t < slots.size(); ++t) {
    if (kv.fp8) {
      fp8_round_trip(k + int64_t(t) * ldk, kv.k + slots[t] * n);
      fp8_round_trip(v + int64_t(t) * ldv, kv.v + slots[t] * n);
      continue;
    }
    std::memcpy(kv.k + slots[t] * n, k + int64_t(t) * ldk, size_t(n) * 4);
    std::memcpy(kv.v + slots[t] * n, v + int64_t(t) * ldv, size_t(n) * 4);
  }
}

void attention(const float* q, int64_t ldq, int64_t q_heads, const PagedKv& kv, const AttnBatch& b,
               float scale, float* out, int64_t ldo, ThreadPool& pool) {
  const int64_t T = int64_t(b.positions.size()), D = kv.head_dim, Hkv = kv.kv_heads;
  const int64_t group = q_heads / Hkv, bs = kv.block_size, sf = kv.slot_floats();
  const int64_t S = int64_t(b.query_start.size()) - 1;
  // Row -> sequence, for splitting the work over (row, head) pairs.
  std::vector<int32_t> seq_of(static_cast<size_t>(T));
  for (int64_t s = 0; s < S; ++s)
    for (int32_t r = b.query_start[size_t(s)]; r < b.query_start[size_t(s) + 1]; ++r)
      seq_of[size_t(r)] = int32_t(s);
  pool.parallel_for(T * q_heads, 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> p, acc(static_cast<size_t>(D));
    for (int64_t job = begin; job < end; ++job) {
      const int64_t r = job / q_heads, h = job % q_heads, kvh = h / group;
      const int32_t* table = b.block_tables.data() + int64_t(seq_of[size_t(r)]) * b.max_blocks;
      const int64_t n = int64_t(b.positions[size_t(r)]) + 1;  // causal: positions 0..pos
      const float* qv = q + r * ldq + h * D;
      p.resize(size_t(n));
      float m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t slot = int64_t(table[j / bs]) * bs + j % bs;
        p[size_t(j)] = dot(qv, kv.k + slot * sf + kvh * D, D) * scale;
        m = std::max(m, p[size_t(j)]);
      }
      double z = 0;
      for (auto& x : p) z += (x = std::exp(x - m));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t slot = int64_t(table[j / bs]) * bs + j % bs;
        axpy(p[size_t(j)], kv.v + slot * sf + kvh * D, acc.data(), D);
      }
      float* o = out + r * ldo + h * D;
      const float inv_z = float(1.0 / z);
      for (int64_t i = 0; i < D; ++i) o[i] = acc[size_t(i)] * inv_z;
    }
  });
}

}  // namespace tandem::cpu
