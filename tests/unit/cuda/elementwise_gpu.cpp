// Embedding gather, RMSNorm + residual, SwiGLU, q/k-norm + RoPE, KV write (bf16 and FP8
// caches) and the random fill against simple CPU loops, on fresh random inputs at odd sizes.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "backend/cuda/embedding.cuh"
#include "backend/cuda/fill.cuh"
#include "backend/cuda/kv_write.cuh"
#include "backend/cuda/qk_norm_rope.cuh"
#include "backend/cuda/rmsnorm.cuh"
#include "backend/cuda/swiglu.cuh"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

TEST(CudaKernels, GatherRowsCopiesExactly) {
  Rng rng(test_seed() + 1);
  const int vocab = 1237, dim = 72, n = 53;
  auto table = random_bf16(rng, size_t(vocab) * dim);
  std::vector<int32_t> ids(n);
  for (auto& i : ids) i = int32_t(rng.next() % vocab);
  Dev<bf16_t> dt(table), dout(size_t(n) * dim);
  Dev<int32_t> di(ids);
  gather_rows(di.get(), dt.get(), dout.get(), n, dim, nullptr);
  auto got = dout.floats();
  for (int t = 0; t < n; ++t)
    for (int d = 0; d < dim; ++d)
      ASSERT_EQ(got[size_t(t) * dim + d], table[size_t(ids[t]) * dim + d]) << t << "," << d;
}

TEST(CudaKernels, RmsNormMatchesCpu) {
  Rng rng(test_seed() + 2);
  for (int dim : {40, 5128}) {
    const int T = 7;
    auto x = random_bf16(rng, size_t(T) * dim, 2.0);
    auto w = random_bf16(rng, dim, 0.2, 1.0);
    Dev<bf16_t> dx(x), dw(w), dout(size_t(T) * dim);
    std::vector<double> ref(x.size()), ref_unit(x.size());
    for (int t = 0; t < T; ++t) {
      double ss = 0;
      for (int d = 0; d < dim; ++d) ss += double(x[size_t(t) * dim + d]) * x[size_t(t) * dim + d];
      const double r = 1.0 / std::sqrt(ss / dim + 1e-6);
      for (int d = 0; d < dim; ++d) {
        ref[size_t(t) * dim + d] = x[size_t(t) * dim + d] * r * w[d];
        ref_unit[size_t(t) * dim + d] = x[size_t(t) * dim + d] * r;
      }
    }
    const std::vector<double> xd(x.begin(), x.end());
    rmsnorm(dx.get(), dw.get(), dout.get(), T, dim, 1e-6f, nullptr);
    EXPECT_LT(rel_error(dout.floats(), ref), 8e-3) << "norm, dim " << dim;
    EXPECT_EQ(rel_error(dx.floats(), xd), 0.0);  // x is only read
    // The norm alone with a unit weight (w folded into the next product): bf16(x r).
    rmsnorm(dx.get(), nullptr, dout.get(), T, dim, 1e-6f, nullptr);
    EXPECT_LT(rel_error(dout.floats(), ref_unit), 5e-3) << "unit weight, dim " << dim;
    EXPECT_EQ(rel_error(dx.floats(), xd), 0.0);
  }
}

// fold_norm_weight: W[n, k] = bf16(W[n, k] w[k]), exactly.
TEST(CudaKernels, FoldNormWeightScalesColumns) {
  Rng rng(test_seed() + 5);
  const int rows = 37, K = 1288;
  auto W = random_bf16(rng, size_t(rows) * K);
  auto w = random_bf16(rng, K, 0.3, 1.0);
  Dev<bf16_t> dW(W), dw(w);
  fold_norm_weight(dW.get(), rows, K, dw.get(), nullptr);
  const auto got = dW.floats();
  for (int n = 0; n < rows; ++n)
    for (int k = 0; k < K; ++k)
      ASSERT_EQ(got[size_t(n) * K + k], round_bf16(W[size_t(n) * K + k] * w[k])) << n << " " << k;
}

TEST(CudaKernels, SwigluMatchesCpu) {
  Rng rng(test_seed() + 3);
  // Odd sizes; a row longer than one block's 256 words; more rows than a grid's 65,535.
  for (auto [T, inter] : {std::pair{9, 344}, std::pair{3, 2056}, std::pair{65600, 16}}) {
    auto gu = random_bf16(rng, size_t(T) * 2 * inter, 2.0);
    Dev<bf16_t> dg(gu), dout(size_t(T) * inter);
    swiglu(dg.get(), dout.get(), T, inter, nullptr);
    std::vector<double> ref(size_t(T) * inter);
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < inter; ++i) {
        double g = gu[size_t(t) * 2 * inter + i], u = gu[size_t(t) * 2 * inter + inter + i];
        ref[size_t(t) * inter + i] = g / (1 + std::exp(-g)) * u;
      }
    EXPECT_LT(rel_error(dout.floats(), ref), 8e-3) << T << " x " << inter;
  }
}

// q/k RMSNorm then NeoX RoPE, in double, from the formulas of REFERENCE.md section 2.
void qk_norm_rope_ref(std::vector<double>& qkv, const std::vector<float>& in,
                      const std::vector<int32_t>& pos, const std::vector<float>& qw,
                      const std::vector<float>& kw, const std::vector<float>& inv_freq,
                      float mscale, int T, int Hq, int Hkv, int hd) {
  const int row = (Hq + 2 * Hkv) * hd, half = hd / 2;
  qkv.assign(in.begin(), in.end());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq + Hkv; ++h) {
      double* x = qkv.data() + size_t(t) * row + size_t(h) * hd;
      const auto& w = h < Hq ? qw : kw;
      double ss = 0;
      for (int i = 0; i < hd; ++i) ss += x[i] * x[i];
      const double r = 1.0 / std::sqrt(ss / hd + 1e-6);
      std::vector<double> y(hd);
      for (int i = 0; i < hd; ++i) y[i] = x[i] * r * w[i];
      for (int i = 0; i < half; ++i) {
        const double f = double(pos[t]) * double(inv_freq[i]);
        const double c = std::cos(f) * mscale, s = std::sin(f) * mscale;
        x[i] = y[i] * c - y[i + half] * s;
        x[i + half] = y[i + half] * c + y[i] * s;
      }
    }
}

TEST(CudaKernels, QkNormRopeMatchesCpu) {
  Rng rng(test_seed() + 4);
  struct Case {
    int Hq, Hkv, hd;
    float mscale;
    int T;
  };
  // hd 16 / 64 / 128 take the vector path (hd 72 the scalar one, in the FP8 test below);
  // hundreds of rows as in prefill.
  for (Case c :
       {Case{5, 1, 128, 1.0f, 11}, Case{4, 2, 16, 1.0f, 11}, Case{8, 2, 64, 1.1386f, 11},
        Case{40, 8, 128, 1.0f, 11}, Case{40, 8, 128, 1.0f, 523}, Case{3, 2, 16, 1.0f, 600}}) {
    const int T = c.T, row = (c.Hq + 2 * c.Hkv) * c.hd;
    auto qkv = random_bf16(rng, size_t(T) * row, 1.5);
    auto qw = random_bf16(rng, c.hd, 0.2, 1.0), kw = random_bf16(rng, c.hd, 0.2, 1.0);
    std::vector<int32_t> pos(T);
    for (auto& p : pos) p = int32_t(rng.next() % 40000);
    std::vector<float> inv(c.hd / 2);
    for (int i = 0; i < c.hd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / c.hd));
    Dev<bf16_t> d(qkv), dqw(qw), dkw(kw);
    Dev<int32_t> dp(pos);
    Dev<float> dinv(inv);
    qk_norm_rope(d.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), c.mscale}, T, c.Hq,
                 c.Hkv, c.hd, 1e-6f, nullptr);
    std::vector<double> ref;
    qk_norm_rope_ref(ref, qkv, pos, qw, kw, inv, c.mscale, T, c.Hq, c.Hkv, c.hd);
    auto got = d.floats();
    EXPECT_LT(rel_error(got, ref), 1.5e-2) << "hd " << c.hd;
    // v heads untouched.
    for (int t = 0; t < T; ++t)
      for (int i = (c.Hq + c.Hkv) * c.hd; i < row; ++i)
        ASSERT_EQ(got[size_t(t) * row + i], qkv[size_t(t) * row + i]);

    // Fused KV write: the same qkv result, and the cache holds exactly what kv_write would
    // copy from it (row 2 skipped by a negative slot).
    const int slots = 3 * T, kvd = c.Hkv * c.hd;
    std::vector<int64_t> slot(T);
    for (int t = 0; t < T; ++t) slot[t] = t == 2 ? -1 : 3 * t + 1;
    Dev<bf16_t> d2(qkv), kc(size_t(slots) * kvd), vc(size_t(slots) * kvd);
    Dev<int64_t> ds(slot);
    auto kc0 = kc.floats(), vc0 = vc.floats();  // poison, which must stay where not written
    qk_norm_rope(d2.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), c.mscale}, T, c.Hq,
                 c.Hkv, c.hd, 1e-6f, nullptr, KvDest{ds.get(), kc.get(), vc.get()});
    auto got2 = d2.floats(), k = kc.floats(), v = vc.floats();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got2[i], got[i]) << i;
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < kvd; ++i) {
        const size_t at = size_t(3 * t + 1) * kvd + i;
        if (slot[t] < 0) {
          ASSERT_TRUE(std::isnan(k[at]) && std::isnan(v[at]));
          continue;
        }
        ASSERT_EQ(k[at], got[size_t(t) * row + c.Hq * c.hd + i]) << t << " " << i;
        ASSERT_EQ(v[at], got[size_t(t) * row + c.Hq * c.hd + kvd + i]) << t << " " << i;
      }
    (void)kc0;
    (void)vc0;

    // With the input norm's row scale (the qkv product read the raw residual rows x): every
    // qkv value, v heads too, scaled by rsqrt(mean(x_t^2) + eps) first; the cache gets the
    // finished k and the scaled v.
    const int dim = 200;
    auto xin = random_bf16(rng, size_t(T) * dim, 4.0);
    std::vector<float> scaled(qkv.size());
    for (int t = 0; t < T; ++t) {
      double ss = 0;
      for (int i = 0; i < dim; ++i)
        ss += double(xin[size_t(t) * dim + i]) * xin[size_t(t) * dim + i];
      const double r = 1.0 / std::sqrt(ss / dim + 1e-6);
      for (int i = 0; i < row; ++i)
        scaled[size_t(t) * row + i] = float(double(qkv[size_t(t) * row + i]) * r);
    }
    std::vector<double> ref3;
    qk_norm_rope_ref(ref3, scaled, pos, qw, kw, inv, c.mscale, T, c.Hq, c.Hkv, c.hd);
    Dev<bf16_t> d3(qkv), dxin(xin), kc3(size_t(slots) * kvd), vc3(size_t(slots) * kvd);
    qk_norm_rope(d3.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), c.mscale}, T, c.Hq,
                 c.Hkv, c.hd, 1e-6f, nullptr, KvDest{ds.get(), kc3.get(), vc3.get()},
                 RowNormInput{dxin.get(), dim, 1e-6f});
    auto got3 = d3.floats(), k3 = kc3.floats(), v3 = vc3.floats();
    EXPECT_LT(rel_error(got3, ref3), 1.5e-2) << "row scale, hd " << c.hd;
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < kvd; ++i) {
        const size_t at = size_t(3 * t + 1) * kvd + i;
        if (slot[t] < 0) continue;
        ASSERT_EQ(k3[at], got3[size_t(t) * row + c.Hq * c.hd + i]) << t << " " << i;
        ASSERT_EQ(v3[at], got3[size_t(t) * row + c.Hq * c.hd + kvd + i]) << t << " " << i;
      }
  }
}

TEST(CudaKernels, KvWriteFillsSlotsAndSkipsNegative) {
  Rng rng(test_seed() + 5);
  const int T = 13, Hq = 5, Hkv = 1, hd = 128, slots = 97;
  const int row = (Hq + 2 * Hkv) * hd, kvd = Hkv * hd;
  auto qkv = random_bf16(rng, size_t(T) * row);
  std::vector<int64_t> slot(T);
  std::vector<int> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = slots - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  for (int t = 0; t < T; ++t) slot[t] = t == 3 ? -1 : perm[t];
  auto kc0 = random_bf16(rng, size_t(slots) * kvd), vc0 = random_bf16(rng, size_t(slots) * kvd);
  Dev<bf16_t> dq(qkv), dk(kc0), dv(vc0);
  Dev<int64_t> ds(slot);
  kv_write(dq.get(), ds.get(), dk.get(), dv.get(), T, Hq, Hkv, hd, nullptr);
  auto k = dk.floats(), v = dv.floats();
  std::vector<float> kr = kc0, vr = vc0;
  for (int t = 0; t < T; ++t) {
    if (slot[t] < 0) continue;
    for (int i = 0; i < kvd; ++i) {
      kr[size_t(slot[t]) * kvd + i] = qkv[size_t(t) * row + Hq * hd + i];
      vr[size_t(slot[t]) * kvd + i] = qkv[size_t(t) * row + Hq * hd + kvd + i];
    }
  }
  EXPECT_EQ(k, kr);
  EXPECT_EQ(v, vr);
}

// A device buffer's raw contents.
template <class T>
std::vector<T> raw(const Dev<T>& d) {
  std::vector<T> v(d.size());
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  TANDEM_CUDA_CHECK(cudaMemcpy(v.data(), d.get(), v.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// An FP8 cache of `slots` rows of Hkv heads: codes and scales, poisoned (0xff bytes) so that
// unwritten entries stay recognisable.
struct Fp8Cache {
  Dev<uint8_t> kc, vc;
  Dev<float> ks, vs;
  Fp8Cache(int slots, int Hkv, int hd)
      : kc(size_t(slots) * Hkv * hd),
        vc(size_t(slots) * Hkv * hd),
        ks(size_t(slots) * Hkv),
        vs(size_t(slots) * Hkv) {}
};

// Checks an FP8 cache against the host rule: for every row t with slot[t] >= 0, k/v head g
// holds kv_fp8_quantize of the bf16 values at src[t * row + k0 + g hd] (v: + Hkv hd), and
// everything else (skipped rows, untouched slots) is still poison. Scales compared as bits.
void expect_fp8_cache(const Fp8Cache& c, const std::vector<float>& src,
                      const std::vector<int64_t>& slot, int row, int k0, int slots, int Hkv, int hd,
                      const char* what) {
  const size_t kvd = size_t(Hkv) * hd;
  std::vector<uint8_t> kq(size_t(slots) * kvd, 0xff), vq(kq);
  std::vector<uint32_t> kbits(size_t(slots) * Hkv, 0xffffffffu), vbits(kbits);
  for (size_t t = 0; t < slot.size(); ++t) {
    if (slot[t] < 0) continue;
    for (int g = 0; g < Hkv; ++g) {
      const size_t r = size_t(slot[t]) * Hkv + g;
      const float* k = src.data() + t * row + k0 + size_t(g) * hd;
      const float sk = kv_fp8_quantize(k, hd, kq.data() + r * hd);
      const float sv = kv_fp8_quantize(k + kvd, hd, vq.data() + r * hd);
      std::memcpy(&kbits[r], &sk, 4);
      std::memcpy(&vbits[r], &sv, 4);
    }
  }
  const auto gk = raw(c.kc), gv = raw(c.vc);
  const auto gks = raw(c.ks), gvs = raw(c.vs);
  for (size_t i = 0; i < kq.size(); ++i) {
    ASSERT_EQ(int(gk[i]), int(kq[i]))
        << what << ": k code " << i << " (cache row " << i / hd << ")";
    ASSERT_EQ(int(gv[i]), int(vq[i]))
        << what << ": v code " << i << " (cache row " << i / hd << ")";
  }
  for (size_t r = 0; r < kbits.size(); ++r) {
    uint32_t a, b;
    std::memcpy(&a, &gks[r], 4);
    std::memcpy(&b, &gvs[r], 4);
    ASSERT_EQ(a, kbits[r]) << what << ": k scale of cache row " << r << " = " << gks[r];
    ASSERT_EQ(b, vbits[r]) << what << ": v scale of cache row " << r << " = " << gvs[r];
  }
}

// Slots for T rows: a random permutation of [0, slots), row `skip` skipped (slot -1).
std::vector<int64_t> random_slots(Rng& rng, int T, int slots, int skip) {
  std::vector<int> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = slots - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<int64_t> slot(T);
  for (int t = 0; t < T; ++t) slot[t] = t == skip ? -1 : perm[t];
  return slot;
}

// The fused write into an FP8 cache: the qkv result is that of the bf16-cache run, and each
// written (slot, head) holds exactly kv_fp8_quantize of the kernel's own finished bf16 k/v
// values, with and without the input norm's row scale.
TEST(CudaKernels, QkNormRopeFp8CacheMatchesHostQuantize) {
  Rng rng(test_seed() + 6);
  struct Case {
    int Hq, Hkv, hd;
    float mscale;
  };
  for (Case c : {Case{5, 1, 128, 1.0f}, Case{4, 2, 16, 1.0f}, Case{7, 3, 72, 1.1386f},
                 Case{3, 3, 256, 1.0f}, Case{40, 8, 128, 1.0f}}) {
    const int T = 11, row = (c.Hq + 2 * c.Hkv) * c.hd, kvd = c.Hkv * c.hd, slots = 2 * T + 3;
    auto qkv = random_bf16(rng, size_t(T) * row, 1.5);
    // Row 4: k head 0 and the last v head all zero (k stays zero through norm and rotation).
    for (int i = 0; i < c.hd; ++i) {
      qkv[size_t(4) * row + c.Hq * c.hd + i] = 0.0f;
      qkv[size_t(4) * row + row - c.hd + i] = 0.0f;
    }
    // Row 6's v heads a thousand times larger: the scale follows each vector's own amax.
    for (int i = (c.Hq + c.Hkv) * c.hd; i < row; ++i)
      qkv[size_t(6) * row + i] = round_bf16(qkv[size_t(6) * row + i] * 1000.0f);
    auto qw = random_bf16(rng, c.hd, 0.2, 1.0), kw = random_bf16(rng, c.hd, 0.2, 1.0);
    std::vector<int32_t> pos(T);
    for (auto& p : pos) p = int32_t(rng.next() % 40000);
    std::vector<float> inv(c.hd / 2);
    for (int i = 0; i < c.hd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / c.hd));
    const auto slot = random_slots(rng, T, slots, 2);
    const int dim = 200;
    auto xin = random_bf16(rng, size_t(T) * dim, 4.0);
    Dev<bf16_t> dqw(qw), dkw(kw), dxin(xin);
    Dev<int32_t> dp(pos);
    Dev<float> dinv(inv);
    Dev<int64_t> ds(slot);
    for (bool row_scale : {false, true}) {
      const RowNormInput in = row_scale ? RowNormInput{dxin.get(), dim, 1e-6f} : RowNormInput{};
      const char* what = row_scale ? "row scale" : "plain";
      Dev<bf16_t> d16(qkv), kc16(size_t(slots) * kvd), vc16(size_t(slots) * kvd), d8(qkv);
      qk_norm_rope(d16.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), c.mscale}, T,
                   c.Hq, c.Hkv, c.hd, 1e-6f, nullptr, KvDest{ds.get(), kc16.get(), vc16.get()}, in);
      Fp8Cache f(slots, c.Hkv, c.hd);
      qk_norm_rope(d8.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), c.mscale}, T,
                   c.Hq, c.Hkv, c.hd, 1e-6f, nullptr,
                   KvDest{ds.get(), f.kc.get(), f.vc.get(), f.ks.get(), f.vs.get()}, in);
      const auto got16 = d16.floats(), got8 = d8.floats();
      for (size_t i = 0; i < got16.size(); ++i)
        ASSERT_EQ(got8[i], got16[i]) << what << ", hd " << c.hd << ", qkv value " << i;
      expect_fp8_cache(f, got8, slot, row, c.Hq * c.hd, slots, c.Hkv, c.hd, what);
      // The zero vectors: scale 0, codes 0.
      const size_t r0 = size_t(slot[4]) * c.Hkv;
      EXPECT_EQ(raw(f.ks)[r0], 0.0f) << what;
      EXPECT_EQ(raw(f.vs)[r0 + c.Hkv - 1], 0.0f) << what;
    }
  }
}

// Timing at Qwen3-14B's heads (40 q, 8 KV, hd 128) with the input norm's row scale and the
// cache write, as in the model: decode-step rows and a prefill step's.
TEST(CudaKernels, QkNormRopeTiming) {
  Rng rng(test_seed() + 8);
  const int Hq = 40, Hkv = 8, hd = 128, dim = 5120, row = (Hq + 2 * Hkv) * hd;
  for (int T : {64, 256, 8192}) {
    auto qkv = random_bf16(rng, size_t(T) * row, 1.5);
    auto xin = random_bf16(rng, size_t(T) * dim, 2.0);
    auto qw = random_bf16(rng, hd, 0.2, 1.0), kw = random_bf16(rng, hd, 0.2, 1.0);
    std::vector<int32_t> pos(T);
    for (int t = 0; t < T; ++t) pos[t] = int32_t(T > 256 ? t : 400 + rng.next() % 256);
    std::vector<float> inv(hd / 2);
    for (int i = 0; i < hd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / hd));
    std::vector<int64_t> slot(T);
    for (int t = 0; t < T; ++t) slot[t] = t;
    Dev<bf16_t> d(qkv), dx(xin), dqw(qw), dkw(kw), kc(size_t(T) * Hkv * hd),
        vc(size_t(T) * Hkv * hd);
    Dev<int32_t> dp(pos);
    Dev<float> dinv(inv);
    Dev<int64_t> ds(slot);
    const double us = time_us(
        [&] {
          qk_norm_rope(d.get(), dp.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), 1.0f}, T, Hq,
                       Hkv, hd, 1e-6f, nullptr, KvDest{ds.get(), kc.get(), vc.get()},
                       RowNormInput{dx.get(), dim, 1e-6f});
        },
        20);
    const double bytes = double(T) * (2.0 * row * 2 + 2.0 * dim + 2.0 * 2 * Hkv * hd);
    std::printf("[ perf ] qk_norm_rope T=%d: %.1f us, %.2f TB/s of its bytes\n", T, us,
                bytes / us * 1e-6);
  }
}

// kv_write into an FP8 cache: each written (slot, head) is kv_fp8_quantize of the row's bf16
// k/v values; skipped and untouched slots keep their poison, and qkv is only read.
TEST(CudaKernels, KvWriteFp8MatchesHostQuantize) {
  Rng rng(test_seed() + 7);
  struct Case {
    int Hq, Hkv, hd;
  };
  // hd / 8 words per vector: 16, 9 (groups of 16 lanes, 7 idle), 32, 1 (32 vectors a warp),
  // 3; and the Qwen3 shape (256 threads).
  for (Case c : {Case{5, 1, 128}, Case{4, 3, 72}, Case{2, 2, 256}, Case{6, 5, 8}, Case{1, 7, 24},
                 Case{40, 8, 128}}) {
    const int T = 13, slots = 41, row = (c.Hq + 2 * c.Hkv) * c.hd;
    auto qkv = random_bf16(rng, size_t(T) * row);
    // Each k/v vector at its own magnitude, 2^-12 .. 2^12; row 5's first k and last v zero.
    for (int t = 0; t < T; ++t)
      for (int h = c.Hq; h < c.Hq + 2 * c.Hkv; ++h) {
        const float m = float(std::exp2(-12.0 + 24.0 * rng.uniform()));
        for (int i = 0; i < c.hd; ++i) {
          float& v = qkv[size_t(t) * row + size_t(h) * c.hd + i];
          v = (t == 5 && (h == c.Hq || h == c.Hq + 2 * c.Hkv - 1)) ? 0.0f : round_bf16(v * m);
        }
      }
    const auto slot = random_slots(rng, T, slots, 3);
    Dev<bf16_t> dq(qkv);
    Dev<int64_t> ds(slot);
    Fp8Cache f(slots, c.Hkv, c.hd);
    kv_write(dq.get(), ds.get(), f.kc.get(), f.vc.get(), T, c.Hq, c.Hkv, c.hd, nullptr, f.ks.get(),
             f.vs.get());
    expect_fp8_cache(f, qkv, slot, row, c.Hq * c.hd, slots, c.Hkv, c.hd, "kv_write");
    EXPECT_EQ(dq.floats(), qkv);
    const size_t r0 = size_t(slot[5]) * c.Hkv;
    EXPECT_EQ(raw(f.ks)[r0], 0.0f);
    EXPECT_EQ(raw(f.vs)[r0 + c.Hkv - 1], 0.0f);
  }
}

TEST(CudaKernels, FillRandomHasTheAskedMoments) {
  const size_t n = 1000003;
  Dev<bf16_t> d(n);
  fill_random(d.get(), n, test_seed(), 0.5f, 0.02f, nullptr);
  auto v = d.floats();
  double s = 0, s2 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    s += x;
    s2 += double(x) * x;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 1e-3);
  EXPECT_NEAR(std::sqrt(var), 0.02, 1e-3);
  Dev<float> f(n);
  bf16_to_f32(d.get(), f.get(), n, nullptr);
  EXPECT_EQ(f.floats(), v);
}

}  // namespace
}  // namespace tandem::cuda::test
