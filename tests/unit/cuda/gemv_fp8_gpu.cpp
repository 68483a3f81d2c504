// The small-batch linear layer over FP8 weights (e4m3 codes in 128 x 128 blocks with fp32
// scales, core/fp8.h; bf16 activations) against a double-precision CPU loop over the weights
// as core/fp8.h reads them back, in its plain, accumulate and SwiGLU forms at odd sizes and
// strides; its argument checks; and its speed at Qwen3-14B's decode shapes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/fill.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_fp8.cuh"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// Block-quantised weights of `rows` x K and the values they read back as (double).
struct Fp8Weights {
  int rows = 0, K = 0, lds = 0;
  std::vector<uint8_t> q;
  std::vector<float> s;     // [blocks(rows)][lds]; the columns past blocks(K) hold NaN
  std::vector<double> deq;  // rows x K: e4m3(q) * s, by fp8_e4m3_to_float
};

// Random weights whose magnitude changes per 128 x 128 block (10^-2 to 10^1, one block all
// zero: zero codes and a zero scale), quantised by fp8_block_quantize: the blocks' scales
// differ by up to three orders of magnitude, so a scale taken from the wrong block shows.
Fp8Weights make_weights(Rng& rng, int rows, int K, int lds) {
  Fp8Weights w;
  w.rows = rows, w.K = K, w.lds = lds;
  const int64_t rb = fp8_blocks(rows), kb = fp8_blocks(K);
  std::vector<double> mag(size_t(rb * kb));
  for (auto& m : mag) m = std::pow(10.0, 3.0 * rng.uniform() - 2.0) / std::sqrt(double(K));
  if (mag.size() > 1) mag[mag.size() / 2] = 0.0;
  std::vector<float> f(size_t(rows) * K);
  for (int n = 0; n < rows; ++n)
    for (int k = 0; k < K; ++k)
      f[size_t(n) * K + k] = float(rng.normal() * mag[size_t(n / kFp8Block * kb + k / kFp8Block)]);
  w.q.resize(f.size());
  w.s.assign(size_t(rb * lds), NAN);  // a scale read past the K blocks makes the output NaN
  fp8_block_quantize(f.data(), rows, K, w.q.data(), w.s.data(), lds);
  w.deq.resize(f.size());
  for (int n = 0; n < rows; ++n)
    for (int k = 0; k < K; ++k)
      w.deq[size_t(n) * K + k] = double(fp8_e4m3_to_float(w.q[size_t(n) * K + k])) *
                                 w.s[size_t(n / kFp8Block) * lds + k / kFp8Block];
  return w;
}

// One call of gemv_fp8 (T rows of X, N outputs; SwiGLU: w holds 2N rows) against the CPU.
//
// Tolerance: the reference is the double result rounded to bf16 the way the kernel rounds
// (SwiGLU: g, u, silu(g) and the product each through bf16). The kernel's fp32 sums differ
// from the double ones by about sqrt(K) * 2^-24 of the terms' magnitude, far below a bf16
// step (2^-8 to 2^-7 of the value), so an output either matches or, where the two sums
// straddle a rounding boundary, sits one step away: <= 2^-7 = 0.78% of the row's largest
// |y|, bounded at 1e-2 of it. In the SwiGLU form a step of g or u also moves silu(g) * u by
// up to about 2.2 * 2^-7 of the row's largest |y| (silu(g) >= g / 2 for g > 0), bounded at
// 2e-2. A scale taken from the wrong block (the blocks' magnitudes differ up to 1000x) or a
// missed 16-code chunk breaks these by far. The L2 error against the unrounded result is the
// roundings' alone: at most 2^-8 = 3.9e-3 of the values for one rounding, bounded at 5e-3;
// SwiGLU's four roundings measured up to 6.2e-3 (40 seeds of these cases in a CPU emulation
// of the kernel's arithmetic), bounded at 1e-2, as CudaKernels.LinearSwigluMatchesCpu bounds
// the bf16 GEMV.
void check(Rng& rng, const Fp8Weights& w, int T, int N, int ldx, int ldy, bool swiglu,
           bool accumulate) {
  const int K = w.K;
  ASSERT_EQ(w.rows, swiglu ? 2 * N : N);
  // X's stride gap holds NaN: a read past K would make the outputs NaN.
  auto x = random_bf16(rng, size_t(T) * ldx);
  for (int t = 0; t < T; ++t)
    for (int k = K; k < ldx; ++k) x[size_t(t) * ldx + k] = NAN;
  // Y starts random in every row and gap, one row more than T: all of it outside [T, N)
  // must stay as it was; inside, accumulate adds to it.
  const auto y0 = random_bf16(rng, size_t(T + 1) * ldy, 2.0);
  Dev<bf16_t> dx(x), dy(y0);
  Dev<uint8_t> dq(w.q);
  Dev<float> ds(w.s);
  gemv_fp8(dx.get(), ldx, dq.get(), ds.get(), w.lds, dy.get(), ldy, T, N, K, nullptr, swiglu,
           accumulate);
  const auto y = dy.floats();
  const std::string what = "T " + std::to_string(T) + " N " + std::to_string(N) + " K " +
                           std::to_string(K) + " ldx " + std::to_string(ldx) + " ldy " +
                           std::to_string(ldy) + " lds " + std::to_string(w.lds) +
                           (swiglu ? " swiglu" : "") + (accumulate ? " accumulate" : "");
  auto dot = [&](int t, int r) {
    double a = 0;
    for (int k = 0; k < K; ++k) a += double(x[size_t(t) * ldx + k]) * w.deq[size_t(r) * K + k];
    return a;
  };
  std::vector<float> got;
  std::vector<double> exact;
  const double tol = swiglu ? 2e-2 : 1e-2;
  int bad = 0, nonfinite = 0;
  double worst = 0;  // largest |y - reference| / row scale
  for (int t = 0; t < T; ++t) {
    std::vector<double> ex(N), rounded(N);
    for (int n = 0; n < N; ++n) {
      if (swiglu) {
        const double g = dot(t, n), u = dot(t, N + n);
        ex[n] = g / (1 + std::exp(-g)) * u;
        const float gr = round_bf16(float(g));
        const float sr = round_bf16(gr / (1.0f + std::exp(-gr)));
        rounded[n] = round_bf16(sr * round_bf16(float(u)));
      } else {
        ex[n] = dot(t, n) + (accumulate ? double(y0[size_t(t) * ldy + n]) : 0.0);
        rounded[n] = round_bf16(float(ex[n]));
      }
    }
    double scale = 0;
    for (double v : ex) scale = std::max(scale, std::fabs(v));
    if (scale == 0) scale = 1;
    for (int n = 0; n < N; ++n) {
      const float v = y[size_t(t) * ldy + n];
      got.push_back(v);
      exact.push_back(ex[n]);
      if (!std::isfinite(v)) {
        ++nonfinite;
        continue;
      }
      const double d = std::fabs(double(v) - rounded[n]) / scale;
      worst = std::max(worst, d);
      if (d > tol && bad++ < 5)
        ADD_FAILURE() << what << ": y[" << t << ", " << n << "] = " << v << ", reference "
                      << rounded[n] << " (row scale " << scale << ")";
    }
  }
  EXPECT_EQ(nonfinite, 0) << what;
  EXPECT_EQ(bad, 0) << what << ": worst " << worst << " of the row scale";
  EXPECT_LT(rel_error(got, exact), swiglu ? 1e-2 : 5e-3) << what;
  for (int t = 0; t <= T; ++t)
    for (int n = t < T ? N : 0; n < ldy; ++n)
      ASSERT_EQ(std::memcmp(&y[size_t(t) * ldy + n], &y0[size_t(t) * ldy + n], sizeof(float)), 0)
          << what << ": y[" << t << ", " << n << "] outside the output was written";
}

// Plain products for every row count: N not a multiple of 128 (a partial row block) nor of
// the 8 warps of a thread block, K of one block, of whole blocks and of a partial last block
// (656 = 5 * 128 + 16), row strides past K and N, scale strides past ceil(K / 128).
// Both forms: the CUDA-core one (kernel 0) at 1-8 rows, the tensor-core one (kernel 1) at
// 1-16 (its 9-16 take two 8-row groups).
constexpr int kCoreRows = 8;
int max_rows(int kernel) {
  return kernel == 0 ? kCoreRows : kGemvFp8MaxTokens;
}
struct ForceKernel {  // the form for the calls in its scope
  explicit ForceKernel(int k) { gemv_fp8_force_kernel(k); }
  ~ForceKernel() { gemv_fp8_force_kernel(-1); }
};

TEST(GemvFp8, MatchesCpuForEveryRowCount) {
  Rng rng(test_seed() + 61);
  struct Shape {
    int N, K, lds_pad;
  };
  for (int kernel : {0, 1}) {
    ForceKernel fk(kernel);
    for (Shape sh :
         {Shape{300, 128, 0}, Shape{300, 640, 3}, Shape{1000, 656, 2}, Shape{1000, 2176, 1}}) {
      const auto w = make_weights(rng, sh.N, sh.K, int(fp8_blocks(sh.K)) + sh.lds_pad);
      for (int T = 1; T <= max_rows(kernel); ++T)
        check(rng, w, T, sh.N, sh.K + 24, sh.N + 5, false, false);
    }
    // One 16-code chunk per row (31 of 32 lanes idle), fewer columns than warps in a block
    // (and than a tensor-core block's 16).
    const auto tiny = make_weights(rng, 5, 16, 1);
    for (int T : {1, 8}) check(rng, tiny, T, 5, 16, 5, false, false);
    const auto one = make_weights(rng, 1, 2048, 16);
    check(rng, one, 3, 1, 2056, 1, false, false);
  }
}

// Y = bf16(X Wd^T + Y) from random Y (the residual add of the o and down products).
TEST(GemvFp8, AccumulateMatchesCpu) {
  Rng rng(test_seed() + 62);
  for (int kernel : {0, 1}) {
    ForceKernel fk(kernel);
    const auto w = make_weights(rng, 300, 2176, int(fp8_scale_stride(2176)));
    for (int T = 1; T <= max_rows(kernel); ++T) check(rng, w, T, 300, 2184, 307, false, true);
    const auto w2 = make_weights(rng, 1000, 656, int(fp8_blocks(656)));
    for (int T : {1, 4, 8}) check(rng, w2, T, 1000, 656, 1000, false, true);
  }
}

// The fused gate/up form: N = 200, so the scale row block 1 (rows 128..255) holds gate rows
// 128..199 and up rows 200..255 (the up row N + n takes the scale of row (N + n) / 128).
TEST(GemvFp8, SwigluMatchesCpu) {
  Rng rng(test_seed() + 63);
  for (int kernel : {0, 1}) {
    ForceKernel fk(kernel);
    for (int K : {656, 2176}) {
      const auto w = make_weights(rng, 400, K, int(fp8_scale_stride(K)));
      for (int T = 1; T <= max_rows(kernel); ++T) check(rng, w, T, 200, K + 8, 203, true, false);
    }
    // N = 77: a tensor-core block's 16 up rows straddle the scale blocks' boundary at 128.
    const auto w = make_weights(rng, 2 * 77, 128, 1);
    check(rng, w, 2, 77, 128, 77, true, false);
  }
}

// Both depths of weight loads in flight give the same bits.
TEST(GemvFp8, LoadDepthsAgree) {
  Rng rng(test_seed() + 64);
  ForceKernel fk(0);
  const int N = 300, K = 2176, lds = int(fp8_scale_stride(K));
  const auto w = make_weights(rng, 2 * N, K, lds);
  Dev<uint8_t> dq(w.q);
  Dev<float> ds(w.s);
  for (bool swiglu : {false, true})
    for (int T : {1, 5, 8}) {
      auto x = random_bf16(rng, size_t(T) * K);
      Dev<bf16_t> dx(x), dy(size_t(T) * N);
      std::vector<float> out[2];
      for (int i = 0; i < 2; ++i) {
        gemv_fp8_force_unroll(i ? 4 : 2);
        gemv_fp8(dx.get(), K, dq.get(), ds.get(), lds, dy.get(), N, T, N, K, nullptr, swiglu);
        out[i] = dy.floats();
      }
      gemv_fp8_force_unroll(0);
      EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0)
          << "T " << T << (swiglu ? " swiglu" : "");
    }
}

TEST(GemvFp8, RejectsBadArguments) {
  const int N = 64, K = 256, lds = 2;
  Dev<bf16_t> x(size_t(17) * K), y(size_t(17) * N);
  Dev<uint8_t> q(size_t(N) * K + 16);
  Dev<float> s{size_t(lds)};
  auto call = [&](int T, int k, int ldx, int ld_s, const uint8_t* wq, bool swiglu,
                  bool accumulate) {
    gemv_fp8(x.get(), ldx, wq, s.get(), ld_s, y.get(), N, T, swiglu ? N / 2 : N, k, nullptr, swiglu,
             accumulate);
  };
  EXPECT_NO_THROW(call(8, K, K, lds, q.get(), false, false));
  EXPECT_NO_THROW(call(16, K, K, lds, q.get(), false, false));
  EXPECT_NO_THROW(TANDEM_CUDA_CHECK(cudaDeviceSynchronize()));
  EXPECT_THROW(call(0, K, K, lds, q.get(), false, false), std::exception);      // T
  EXPECT_THROW(call(17, K, K, lds, q.get(), false, false), std::exception);     // T
  EXPECT_THROW(call(1, 40, K, lds, q.get(), false, false), std::exception);     // K % 16
  EXPECT_THROW(call(2, K, K + 4, lds, q.get(), false, false), std::exception);  // ldx % 8
  EXPECT_THROW(call(1, K, K, 1, q.get(), false, false), std::exception);        // lds
  EXPECT_THROW(call(1, K, K, lds, q.get() + 8, false, false), std::exception);  // alignment
  EXPECT_THROW(call(1, K, K, lds, q.get(), true, true), std::exception);  // SwiGLU + accumulate
  EXPECT_THROW(gemv_fp8_force_unroll(3), std::exception);
  EXPECT_THROW(gemv_fp8_force_kernel(2), std::exception);
}

// Qwen3-14B's decode products at 1 to 16 rows: microseconds per call and the rate the
// weights stream at (codes + scales), tensor-core and CUDA-core forms (to 8 rows), beside the
// bf16 GEMV over the same shape (to 8 rows). Weights rotate over copies worth >= 256 MB, so none
// stays in L2. Calls run back to back: both GEMVs load nothing before their grid dependency wait,
// so a call's early start (PDL) overlaps only the previous one's tail with its launch, as between
// the kernels of a decode step.
TEST(GemvFp8, Timing) {
  Rng rng(test_seed() + 65);
  struct Shape {
    const char* name;
    int N, K;
    bool swiglu;
  };
  for (Shape sh : {Shape{"qkv", 7168, 5120, false}, Shape{"o", 5120, 5120, false},
                   Shape{"gate_up", 17408, 5120, true}, Shape{"down", 5120, 17408, false}}) {
    const int rows = sh.swiglu ? 2 * sh.N : sh.N;
    const int lds = int(fp8_scale_stride(sh.K));
    // Random codes (timing needs no particular values), the NaN codes left out.
    std::vector<uint8_t> q(size_t(rows) * sh.K);
    for (size_t i = 0; i < q.size(); i += 8) {
      uint64_t r = rng.next();
      for (size_t j = i; j < std::min(q.size(), i + 8); ++j, r >>= 8)
        q[j] = (r & 0x7f) == 0x7f ? uint8_t(r & 0xfe) : uint8_t(r);
    }
    std::vector<float> s(size_t(fp8_blocks(rows) * lds));
    for (auto& v : s) v = float(1e-4 * (1 + rng.uniform()));
    const size_t fp8_bytes = q.size() + s.size() * sizeof(float);
    const size_t bf16_bytes = q.size() * 2;
    auto copies_of = [](size_t bytes) {
      return int(std::max<size_t>(1, (size_t(256) << 20) / bytes + 1));
    };
    std::vector<std::unique_ptr<Dev<uint8_t>>> qs;
    std::vector<std::unique_ptr<Dev<float>>> ss;
    for (int c = 0; c < copies_of(fp8_bytes); ++c) {
      qs.push_back(std::make_unique<Dev<uint8_t>>(q));
      ss.push_back(std::make_unique<Dev<float>>(s));
    }
    std::vector<std::unique_ptr<Dev<bf16_t>>> ws;
    for (int c = 0; c < copies_of(bf16_bytes); ++c) {
      ws.push_back(std::make_unique<Dev<bf16_t>>(q.size()));
      fill_random(ws.back()->get(), q.size(), 71 + c, 0.0f, 0.02f, nullptr);
    }
    for (int T : {1, 2, 4, 8, 16}) {
      auto x = random_bf16(rng, size_t(T) * sh.K);
      Dev<bf16_t> dx(x), dy(size_t(T) * sh.N);
      int rep = 0;
      auto fp8_call = [&] {
        const size_t c = size_t(++rep) % qs.size();
        gemv_fp8(dx.get(), sh.K, qs[c]->get(), ss[c]->get(), lds, dy.get(), sh.N, T, sh.N, sh.K,
                 nullptr, sh.swiglu);
      };
      double tc = 0, core = 0, bf16 = 0;
      {
        ForceKernel fk(1);
        tc = time_us(fp8_call, 50);
      }
      if (T <= kCoreRows) {
        ForceKernel fk(0);
        core = time_us(fp8_call, 50);
        bf16 = time_us(
            [&] {
              gemv(dx.get(), sh.K, ws[size_t(++rep) % ws.size()]->get(), dy.get(), sh.N, T, sh.N,
                   sh.K, nullptr, sh.swiglu);
            },
            50);
      }
      const double best = tc;
      std::string others;  // the forms that take this many rows
      if (T <= kCoreRows) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      ", CUDA cores %.1f us %.2f TB/s; bf16 gemv %.1f us %.2f TB/s", core,
                      fp8_bytes / core * 1e-6, bf16, bf16_bytes / bf16 * 1e-6);
        others = buf;
      }
      std::printf("[ perf ] gemv_fp8 %s T=%d (%d x %d%s): tensor cores %.1f us %.2f TB/s%s\n",
                  sh.name, T, rows, sh.K, sh.swiglu ? ", SwiGLU" : "", tc, fp8_bytes / tc * 1e-6,
                  others.c_str());
      EXPECT_GT(best, 0.0);
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
