// CPU kernels against plain double-precision loops written here, on random inputs at odd
// sizes: GEMM for each weight dtype, paged attention over shuffled blocks, RoPE, RMSNorm.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec_math.h"
#include "core/bf16.h"
#include "core/rng.h"

using namespace tandem;

namespace {

std::vector<float> randn(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(r.normal() * scale);
  return v;
}

uint16_t to_half(float f) {  // round-to-nearest-even, normal range only (test data)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  int32_t e = int32_t((u >> 23) & 0xff) - 127 + 15;
  uint32_t m = u & 0x7fffff;
  if (e <= 0) return uint16_t(sign);
  uint32_t h = sign | (uint32_t(e) << 10) | (m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return uint16_t(h);
}

}  // namespace

TEST(CpuGemm, MatchesDoubleReferenceForEveryWeightDtype) {
  cpu::ThreadPool pool(3);
  for (int64_t t : {1, 2, 3, 5, 7})
    for (int64_t n : {1, 9, 37})
      for (int64_t k : {1, 17, 50, 131}) {
        auto x = randn(size_t(t * k), uint64_t(t * 1000 + n * 10 + k));
        auto wf = randn(size_t(n * k), uint64_t(n * 7 + k));
        std::vector<bf16> wb(wf.size());
        std::vector<uint16_t> wh(wf.size());
        for (size_t i = 0; i < wf.size(); ++i) {
          wb[i] = float_to_bf16(wf[i]);
          wh[i] = to_half(wf[i]);
        }
        auto h2f = [&](uint16_t h) {  // exact for normal halves
          uint32_t u = (uint32_t(h & 0x8000) << 16) |
                       ((((h >> 10) & 0x1f) == 0) ? 0 : ((((h >> 10) & 0x1f) + 112) << 23)) |
                       (uint32_t(h & 0x3ff) << 13);
          if (((h >> 10) & 0x1f) == 0) u &= 0x80000000u;
          float f;
          std::memcpy(&f, &u, 4);
          return f;
        };
        for (int dt = 0; dt < 3; ++dt) {
          cpu::WeightRef w;
          w.n = n, w.k = k;
          w.type = dt == 0 ? cpu::WType::kBF16 : dt == 1 ? cpu::WType::kF16 : cpu::WType::kF32;
          w.data = dt == 0 ? (const void*)wb.data() : dt == 1 ? (const void*)wh.data() : wf.data();
          auto wval = [&](size_t i) {
            return dt == 0 ? double(bf16_to_float(wb[i])) : dt == 1 ? double(h2f(wh[i])) : wf[i];
          };
          const int64_t ldy = n + 3;  // a row stride wider than the row
          std::vector<float> y(size_t(t * ldy), 0.5f);
          for (int acc = 0; acc < 2; ++acc) {
            std::vector<float> y0 = y;
            cpu::matmul(x.data(), t, k, w, y.data(), ldy, pool, acc == 1);
            for (int64_t r = 0; r < t; ++r)
              for (int64_t c = 0; c < n; ++c) {
                double ref = acc ? y0[size_t(r * ldy + c)] : 0.0;
                for (int64_t i = 0; i < k; ++i)
                  ref += double(x[size_t(r * k + i)]) * wval(size_t(c * k + i));
                ASSERT_NEAR(y[size_t(r * ldy + c)], ref, 1e-4 * (1 + std::sqrt(double(k))))
                    << "t=" << t << " n=" << n << " k=" << k << " dtype=" << dt;
              }
            for (int64_t r = 0; r < t; ++r)  // padding columns untouched
              for (int64_t c = n; c < ldy; ++c)
                ASSERT_EQ(y[size_t(r * ldy + c)], y0[size_t(r * ldy + c)]);
          }
        }
      }
}

TEST(CpuThreadPool, CoversEveryIndexOnceAndRespectsGrain) {
  cpu::ThreadPool pool(4);
  for (int64_t n : {1, 5, 16, 17, 1000, 4097})
    for (int64_t grain : {1, 4, 16}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep)
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int) {
          if (b % grain != 0) hits[size_t(b)] += 1000;  // flags a misaligned range
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 20) << n << " " << grain;
    }
}

TEST(CpuOps, RmsNormAndRopeMatchFormulas) {
  const int64_t T = 3, heads = 3, D = 10, ld = heads * D + 4;
  auto x = randn(size_t(T * ld), 5);
  auto wf = randn(size_t(D), 6, 0.3);
  std::vector<float> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + wf[i];
  cpu::WeightRef wr{w.data(), cpu::WType::kF32, 1, D};
  std::vector<float> y(x.size());
  cpu::rmsnorm(x.data(), T, D, ld, wr, 1e-6, y.data(), ld);
  for (int64_t r = 0; r < T; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(x[size_t(r * ld + i)]) * x[size_t(r * ld + i)];
    double inv = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int64_t i = 0; i < D; ++i)
      EXPECT_NEAR(y[size_t(r * ld + i)], x[size_t(r * ld + i)] * inv * w[size_t(i)], 1e-5);
  }
  std::vector<int32_t> pos = {0, 7, 1234};
  std::vector<float> inv_freq(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[size_t(i)] = float(std::pow(10000.0, -2.0 * i / D));
  auto r = x;
  cpu::rope(r.data(), T, heads, D, ld, pos, inv_freq, 1.25f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        double a = pos[size_t(t)] * double(inv_freq[size_t(i)]);
        double c = std::cos(a) * 1.25, s = std::sin(a) * 1.25;
        double x1 = x[size_t(t * ld + h * D + i)], x2 = x[size_t(t * ld + h * D + i + D / 2)];
        EXPECT_NEAR(r[size_t(t * ld + h * D + i)], x1 * c - x2 * s, 2e-4);
        EXPECT_NEAR(r[size_t(t * ld + h * D + i + D / 2)], x2 * c + x1 * s, 2e-4);
      }
}

TEST(CpuOps, PagedAttentionMatchesDenseCausalGqa) {
  cpu::ThreadPool pool(2);
  for (int64_t bs : {16, 32}) {
    const int64_t Hq = 6, Hkv = 2, D = 12, num_blocks = 20;
    std::vector<float> kc(size_t(num_blocks * bs * Hkv * D)), vc(kc.size());
    cpu::PagedKv kv{kc.data(), vc.data(), num_blocks, bs, Hkv, D};
    // Two sequences: 45 cached + 3 new tokens, and 1 cached + 20 new (a prefill chunk).
    std::vector<int64_t> ctx = {48, 21}, fresh = {3, 20};
    std::vector<int32_t> free_blocks;
    for (int32_t b = 0; b < num_blocks; ++b) free_blocks.push_back(b);
    Rng rng(bs);
    for (size_t i = free_blocks.size(); i > 1; --i)
      std::swap(free_blocks[i - 1], free_blocks[rng.next() % i]);
    const int32_t max_blocks = 4;
    std::vector<int32_t> tables(2 * max_blocks, -1), positions, qs = {0};
    std::vector<std::vector<float>> Kd(2), Vd(2);  // dense copies [ctx, Hkv*D]
    for (int s = 0; s < 2; ++s) {
      for (int64_t j = 0; j < (ctx[size_t(s)] + bs - 1) / bs; ++j) {
        tables[size_t(s * max_blocks + j)] = free_blocks.back();
        free_blocks.pop_back();
      }
      Kd[size_t(s)] = randn(size_t(ctx[size_t(s)] * Hkv * D), 100 + s);
      Vd[size_t(s)] = randn(size_t(ctx[size_t(s)] * Hkv * D), 200 + s);
      std::vector<int64_t> slots;
      for (int64_t j = 0; j < ctx[size_t(s)]; ++j)
        slots.push_back(int64_t(tables[size_t(s * max_blocks + j / bs)]) * bs + j % bs);
      cpu::kv_store(kv, Kd[size_t(s)].data(), Hkv * D, Vd[size_t(s)].data(), Hkv * D, slots);
      for (int64_t j = ctx[size_t(s)] - fresh[size_t(s)]; j < ctx[size_t(s)]; ++j)
        positions.push_back(int32_t(j));
      qs.push_back(int32_t(positions.size()));
    }
    const int64_t T = int64_t(positions.size());
    auto q = randn(size_t(T * Hq * D), 7);
    std::vector<float> out(size_t(T * Hq * D));
    cpu::AttnBatch ab{positions, qs, tables, max_blocks};
    const float scale = 1.0f / std::sqrt(float(D));
    cpu::attention(q.data(), Hq * D, Hq, kv, ab, scale, out.data(), Hq * D, pool);
    for (int s = 0; s < 2; ++s)
      for (int32_t r = qs[size_t(s)]; r < qs[size_t(s) + 1]; ++r)
        for (int64_t h = 0; h < Hq; ++h) {
          const int64_t kvh = h / (Hq / Hkv), n = positions[size_t(r)] + 1;
          std::vector<double> p(static_cast<size_t>(n));
          double m = -1e300, z = 0;
          for (int64_t j = 0; j < n; ++j) {
            double d = 0;
            for (int64_t i = 0; i < D; ++i)
              d += double(q[size_t((r * Hq + h) * D + i)]) *
                   Kd[size_t(s)][size_t((j * Hkv + kvh) * D + i)];
            p[size_t(j)] = d * scale;
            m = std::max(m, p[size_t(j)]);
          }
          for (auto& v : p) z += (v = std::exp(v - m));
          for (int64_t i = 0; i < D; ++i) {
            double o = 0;
            for (int64_t j = 0; j < n; ++j)
              o += p[size_t(j)] * Vd[size_t(s)][size_t((j * Hkv + kvh) * D + i)];
            ASSERT_NEAR(out[size_t((r * Hq + h) * D + i)], o / z, 1e-5)
                << "bs " << bs << " row " << r;
          }
        }
  }
}

TEST(CpuVecMath, ReductionsMatchScalarLoops) {
  for (size_t n : {1u, 15u, 16u, 17u, 1003u}) {
    auto x = randn(n, n, 4.0);
    float m = *std::max_element(x.begin(), x.end());
    EXPECT_EQ(cpu::max_value(x), m);
    EXPECT_EQ(cpu::argmax(x), int64_t(std::max_element(x.begin(), x.end()) - x.begin()));
    double ref = 0;
    for (float v : x) ref += std::exp((double(v) - m) * 0.7);
    EXPECT_NEAR(cpu::sum_exp(x, m, 0.7f), ref, 1e-6 * ref);
  }
  std::vector<float> nan(40, 1.0f);
  nan[33] = std::nanf("");
  EXPECT_TRUE(std::isnan(cpu::sum_exp(nan, 1.0f, 1.0f)));
}
