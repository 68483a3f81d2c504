// Linear layers (cuBLASLt, the small-batch GEMV and the skinny GEMM) against a
// double-precision CPU loop, with row strides as the runner uses them.
#include <cstdlib>

#include "backend/cuda/fill.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gpu_monitor.h"
#include "backend/cuda/rmsnorm.cuh"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

void check_linear(Rng& rng, Gemm& g, bool force_cublas, int T, int N, int K, int ldx, int ldy) {
  auto x = random_bf16(rng, size_t(T) * ldx);
  auto w = random_bf16(rng, size_t(N) * K, 1.0 / std::sqrt(double(K)));
  Dev<bf16_t> dx(x), dw(w), dy(size_t(T) * ldy);
  if (force_cublas)
    g.cublas_linear(dx.get(), dw.get(), dy.get(), T, N, K, nullptr, ldx, ldy);
  else
    g.linear(dx.get(), dw.get(), dy.get(), T, N, K, nullptr, ldx, ldy);
  auto y = dy.floats();
  std::vector<float> got;
  std::vector<double> ref;
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double r = 0;
      for (int k = 0; k < K; ++k) r += double(x[size_t(t) * ldx + k]) * w[size_t(n) * K + k];
      ref.push_back(r);
      got.push_back(y[size_t(t) * ldy + n]);
    }
  EXPECT_LT(rel_error(got, ref), 6e-3)
      << "T " << T << " N " << N << " K " << K << (force_cublas ? " cuBLASLt" : " linear");
}

TEST(CudaKernels, GemvMatchesCpuForEveryRowCount) {
  Rng rng(test_seed() + 21);
  Gemm g(kGemvMaxTokens);
  for (int T = 1; T <= kGemvMaxTokens; ++T) check_linear(rng, g, false, T, 1003, 1160, 1160, 1003);
  check_linear(rng, g, false, 3, 77, 8, 16, 80);  // K of one vector, padded strides
  check_linear(rng, g, false, 1, 517, 5128, 5128, 517);
}

TEST(CudaKernels, CublasLinearMatchesCpu) {
  Rng rng(test_seed() + 22);
  Gemm g(0);
  for (int T : {1, 5, 37, 200}) check_linear(rng, g, true, T, 520, 264, 264, 520);
  check_linear(rng, g, true, 9, 136, 200, 208, 144);
  // linear() with the GEMV off goes to cuBLASLt (a 1.3 MB weight is below the skinny GEMM's
  // size).
  check_linear(rng, g, false, 2, 1000, 640, 640, 1000);
}

// linear() with the skinny GEMM's plain range switched on (on sm_90a; elsewhere cuBLASLt),
// row strides as the runner uses them, at one and two 64-row X tiles.
TEST(CudaKernels, LinearSkinnyRangeMatchesCpu) {
  Rng rng(test_seed() + 25);
  Gemm g(0);
  g.set_skinny_linear_tokens(1, kSkinnyMaxTokens);
  for (int T : {3, 64, 101, 128}) check_linear(rng, g, false, T, 520, 264, 264, 520);
  check_linear(rng, g, false, 90, 136, 200, 208, 144);
}

// Y = bf16(X W^T + Y) (the residual add inside the o and down products): the GEMV for every
// row count, cuBLASLt at odd sizes and strides, against a double CPU loop from a random Y.
TEST(CudaKernels, LinearAccumulateMatchesCpu) {
  Rng rng(test_seed() + 26);
  auto check = [&](Gemm& g, int T, int N, int K, int ldx, int ldy) {
    auto x = random_bf16(rng, size_t(T) * ldx);
    auto w = random_bf16(rng, size_t(N) * K, 1.0 / std::sqrt(double(K)));
    auto y0 = random_bf16(rng, size_t(T) * ldy, 2.0);
    Dev<bf16_t> dx(x), dw(w), dy(y0);
    g.linear(dx.get(), dw.get(), dy.get(), T, N, K, nullptr, ldx, ldy, /*accumulate=*/true);
    const auto y = dy.floats();
    std::vector<float> got;
    std::vector<double> ref;
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        double r = y0[size_t(t) * ldy + n];
        for (int k = 0; k < K; ++k) r += double(x[size_t(t) * ldx + k]) * w[size_t(n) * K + k];
        ref.push_back(r);
        got.push_back(y[size_t(t) * ldy + n]);
      }
    EXPECT_LT(rel_error(got, ref), 6e-3) << "T " << T << " N " << N << " K " << K;
    for (int t = 0; t < T; ++t)  // the stride's gap is not written
      for (int n = N; n < ldy; ++n)
        ASSERT_EQ(y[size_t(t) * ldy + n], y0[size_t(t) * ldy + n]) << t << " " << n;
  };
  Gemm gemv(kGemvMaxTokens), lib(0);
  for (int T = 1; T <= kGemvMaxTokens; ++T) check(gemv, T, 1003, 1160, 1160, 1003);
  for (int T : {1, 5, 37, 64, 100, 200}) check(lib, T, 520, 264, 264, 520);
  check(lib, 9, 136, 200, 208, 144);
  check(lib, 70, 1000, 1288, 1288, 1000);
}

// Plans are shared by every T of a bucket (the n extent changes per call) and the timed
// choice must give the same products as the library's first answer; an engine whose step
// sizes vary over 1..700 keeps a bounded number of plans.
TEST(CudaKernels, CublasPlansPerBucketStayCorrectAndBounded) {
  Rng rng(test_seed() + 24);
  for (Gemm::Choice c : {Gemm::Choice::kTimed, Gemm::Choice::kHeuristic}) {
    Gemm g(0);
    g.set_choice(c);
    // Buckets 160 (used four times), 32 (twice), 576 and 640.
    for (int T : {129, 150, 144, 131, 17, 31, 513, 577})
      check_linear(rng, g, true, T, 392, 328, 328, 392);
    const size_t after_checks = g.num_plans();
    EXPECT_EQ(after_checks, 4u);
    auto x = random_bf16(rng, size_t(700) * 328);
    auto w = random_bf16(rng, size_t(392) * 328, 0.05);
    Dev<bf16_t> dx(x), dw(w), dy(size_t(700) * 392);
    for (int T = 1; T <= 700; ++T)
      g.cublas_linear(dx.get(), dw.get(), dy.get(), T, 392, 328, nullptr);
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    // One plan per bucket of 1..700 (38 of them), the four above among them.
    EXPECT_EQ(g.num_plans(), 38u);
    if (c == Gemm::Choice::kTimed) {
      EXPECT_FALSE(g.tune_log().empty());
    }
  }
}

// act = silu(x Wg^T) * (x Wu^T): the fused GEMV (T <= 8), cuBLASLt + SwiGLU (larger T) and,
// on sm_90a, the skinny GEMM (here from 8 to 128 rows, for any weight size).
TEST(CudaKernels, LinearSwigluMatchesCpu) {
  Rng rng(test_seed() + 23);
  Gemm g(kGemvMaxTokens);
  g.set_skinny_min_bytes(0);
  g.set_skinny_tokens(8, kSkinnyMaxTokens);
  const int I = 344, K = 648;
  for (int T : {1, 2, 5, 7, 8, 37, 64, 100, 128}) {
    auto x = random_bf16(rng, size_t(T) * K);
    auto w = random_bf16(rng, size_t(2 * I) * K, 2.0 / std::sqrt(double(K)));
    Dev<bf16_t> dx(x), dw(w), dact(size_t(T) * I), dscratch(size_t(T) * 2 * I);
    g.linear_swiglu(dx.get(), dw.get(), dact.get(), dscratch.get(), T, I, K, nullptr);
    std::vector<double> ref(size_t(T) * I);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < I; ++n) {
        double gs = 0, us = 0;
        for (int k = 0; k < K; ++k) {
          gs += double(x[size_t(t) * K + k]) * w[size_t(n) * K + k];
          us += double(x[size_t(t) * K + k]) * w[size_t(I + n) * K + k];
        }
        ref[size_t(t) * I + n] = gs / (1 + std::exp(-gs)) * us;
      }
    EXPECT_LT(rel_error(dact.floats(), ref), 1e-2) << "T " << T;
  }
}

// With the norm inside (the runner's post-attention RMSNorm, its weight folded into W):
// act = silu(r g) * (r u) with r = rsqrt(mean(x^2) + eps) per row of the raw residual x. Every
// path: the GEMV and cuBLASLt after a norm kernel, the skinny GEMM (sm_90a) with the row
// scale in its epilogue, at one and several K splits (a cluster adding up the rows' squares).
TEST(CudaKernels, LinearSwigluNormMatchesCpu) {
  Rng rng(test_seed() + 27);
  const float eps = 1e-6f;
  for (int min_tokens : {8, 1000}) {  // 1000: no skinny GEMM (cuBLASLt from 9 rows)
    Gemm g(kGemvMaxTokens);
    g.set_skinny_min_bytes(0);
    g.set_skinny_tokens(min_tokens, kSkinnyMaxTokens);
    for (auto [I, K] : {std::pair{344, 136}, std::pair{344, 648}, std::pair{56, 2560}}) {
      for (int T : {1, 2, 3, 8, 37, 64, 100, 128}) {
        auto x = random_bf16(rng, size_t(T) * K, 3.0);
        auto nw = random_bf16(rng, K, 0.3, 1.0);
        auto w = random_bf16(rng, size_t(2 * I) * K, 2.0 / std::sqrt(double(K)));
        Dev<bf16_t> dx(x), dw(w), dnw(nw), dact(size_t(T) * I), dscratch(size_t(T) * 2 * I),
            dh(size_t(T) * K);
        fold_norm_weight(dw.get(), size_t(2) * I, K, dnw.get(), nullptr);
        const Gemm::RowNorm norm{eps, dh.get()};
        g.linear_swiglu(dx.get(), dw.get(), dact.get(), dscratch.get(), T, I, K, nullptr, &norm);
        std::vector<double> ref(size_t(T) * I);
        for (int t = 0; t < T; ++t) {
          double ss = 0;
          for (int k = 0; k < K; ++k) ss += double(x[size_t(t) * K + k]) * x[size_t(t) * K + k];
          const double r = 1.0 / std::sqrt(ss / K + eps);
          for (int n = 0; n < I; ++n) {
            double gs = 0, us = 0;
            for (int k = 0; k < K; ++k) {
              const double h = x[size_t(t) * K + k] * r * nw[k];
              gs += h * w[size_t(n) * K + k];
              us += h * w[size_t(I + n) * K + k];
            }
            ref[size_t(t) * I + n] = gs / (1 + std::exp(-gs)) * us;
          }
        }
        EXPECT_LT(rel_error(dact.floats(), ref), 1.2e-2)
            << "T " << T << " I " << I << " K " << K << " skinny from " << min_tokens;
        const auto xs = dx.floats();  // x is only read
        for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(xs[i], x[i]) << i;
      }
    }
  }
}

// Qwen3-14B products at the row counts of mixed steps (64 decodes plus a prefill chunk):
// the library's first choice against the fastest of its candidates, beside the ideal
// max(weight read at 4.24 TB/s, FLOPs at 777 TFLOP/s). Weights rotate over >= 256 MB.
TEST(CudaKernels, MidGemmTiming) {
  Rng rng(test_seed() + 43);
  struct Shape {
    const char* name;
    int N, K;
  };
  for (Shape sh : {Shape{"qkv", 7168, 5120}, Shape{"o", 5120, 5120}, Shape{"gate_up", 34816, 5120},
                   Shape{"down", 5120, 17408}}) {
    const size_t wbytes = size_t(sh.N) * sh.K * 2;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / wbytes + 1));
    std::vector<std::unique_ptr<Dev<bf16_t>>> ws;
    auto w = random_bf16(rng, size_t(sh.N) * sh.K, 0.02);
    for (int c = 0; c < copies; ++c) ws.push_back(std::make_unique<Dev<bf16_t>>(w));
    for (int T : {128, 160, 192, 224, 256, 320, 400, 464}) {
      auto x = random_bf16(rng, size_t(T) * sh.K);
      Dev<bf16_t> dx(x), dy(size_t(T) * sh.N);
      double us[2];
      for (int tuned = 0; tuned < 2; ++tuned) {
        Gemm g(0);
        g.set_choice(tuned ? Gemm::Choice::kTimed : Gemm::Choice::kHeuristic);
        int rep = 0;
        us[tuned] = time_us(
            [&] {
              g.cublas_linear(dx.get(), ws[size_t(++rep % copies)]->get(), dy.get(), T, sh.N, sh.K,
                              nullptr);
            },
            30);
      }
      const double flops = 2.0 * T * double(sh.N) * sh.K;
      const double ideal = std::max(double(wbytes) / 4.24e6, flops / 777e6);
      std::printf(
          "[ perf ] mid %s T=%d: heuristic %.1f us (%.0f TFLOP/s), timed %.1f us (%.0f),"
          " ideal %.1f us (%.2f / %.2f of it)\n",
          sh.name, T, us[0], flops / us[0] * 1e-6, us[1], flops / us[1] * 1e-6, ideal,
          ideal / us[0], ideal / us[1]);
      EXPECT_GT(us[0], 0.0);
    }
  }
}

// Qwen3-14B's four products a layer run back to back for ~3 s at each row count, as a step's
// products would run if nothing else did: the rate they sustain at the clock the power cap
// leaves, with that clock and power. Weights of 4 layers rotate (2.6 GB: none stays in L2).
// This bounds what the engine can reach: its products can run no faster than this, and a
// step's attention adds time and energy on top.
TEST(CudaKernels, SustainedProductTiming) {
  struct Shape {
    int N, K;
  };
  const Shape shapes[] = {{7168, 5120}, {5120, 5120}, {34816, 5120}, {5120, 17408}};
  constexpr int kLayers = 4;
  std::vector<std::unique_ptr<Dev<bf16_t>>> ws;
  uint64_t seed = test_seed() + 44;
  for (int l = 0; l < kLayers; ++l)
    for (Shape sh : shapes) {
      ws.push_back(std::make_unique<Dev<bf16_t>>(size_t(sh.N) * sh.K));
      fill_random(ws.back()->get(), ws.back()->size(), ++seed, 0.0f, 0.02f, nullptr);
    }
  GpuMonitor mon(-1);
  if (!mon.available()) std::printf("[ perf ] sustained: no GPU monitor (%s)\n", mon.why().c_str());
  Gemm g(0);
  // TANDEM_SUSTAINED_ROWS=T and TANDEM_SUSTAINED_S=seconds pick one row count and the length
  // (0: three passes), for profiling a few products under ncu.
  std::vector<int> row_counts{256, 656, 2656, 8192};
  if (const char* e = std::getenv("TANDEM_SUSTAINED_ROWS")) row_counts = {std::atoi(e)};
  double seconds = 3.0;
  if (const char* e = std::getenv("TANDEM_SUSTAINED_S")) seconds = std::atof(e);
  for (int T : row_counts) {
    Dev<bf16_t> dx(size_t(T) * 17408), dy(size_t(T) * 34816);
    fill_random(dx.get(), dx.size(), ++seed, 0.0f, 1.0f, nullptr);
    double flops = 0;
    for (Shape sh : shapes) flops += 2.0 * T * double(sh.N) * sh.K;
    flops *= kLayers;
    auto pass = [&] {  // the products of kLayers layers
      for (int l = 0; l < kLayers; ++l)
        for (int i = 0; i < 4; ++i)
          g.cublas_linear(dx.get(), ws[size_t(l * 4 + i)]->get(), dy.get(), T, shapes[i].N,
                          shapes[i].K, nullptr);
    };
    const double one = time_us(pass, 3);  // warm-up, plans chosen
    const int reps = std::max(3, int(seconds * 1e6 / one));
    const size_t mark = mon.mark();
    const double us = time_us(pass, reps);
    const GpuWindow win = mon.since(mark);
    std::printf("[ perf ] sustained products T=%d: %.0f TFLOP/s over %.1f s (%.2f of 777); %s\n", T,
                flops / us * 1e-6, us * reps * 1e-6, flops / us * 1e-6 / 777.0,
                win.describe().c_str());
    EXPECT_GT(us, 0.0);
  }
}

}  // namespace
}  // namespace tandem::cuda::test
