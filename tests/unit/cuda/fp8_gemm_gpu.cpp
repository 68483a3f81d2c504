// FP8 weights on the GPU: weight and row quantization against the host rule (core/fp8.h),
// cuBLASLt's block-scaled GEMM against a double reference on the dequantized operands (odd
// block counts, so a wrong scale layout shows), and Fp8Gemm's linear layers (GEMV and GEMM
// paths, norm folded in, SwiGLU, accumulate) against the unquantized-activation reference.
#include <memory>
#include <string>

#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_fp8.h"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// Weights whose 128-blocks differ in magnitude by up to 2^6 (scales that must not mix up).
std::vector<float> blocky_weights(Rng& rng, int N, int K) {
  std::vector<float> w(size_t(N) * K);
  const int nb = int(fp8_blocks(N)), kb = int(fp8_blocks(K));
  std::vector<float> mag(size_t(nb) * kb);
  for (auto& m : mag) m = std::ldexp(1.0f, int(rng.next() % 7) - 3) * 0.02f;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      w[size_t(n) * K + k] =
          round_bf16(float(rng.normal()) * mag[size_t(n / kFp8Block) * kb + k / kFp8Block]);
  return w;
}

// A weight quantized on the GPU, with its codes and scales back on the host.
struct Fp8W {
  int N, K, lds;
  Dev<uint8_t> q;
  Dev<float> s;
  std::vector<uint8_t> hq;
  std::vector<float> hs;
  Fp8W(const std::vector<float>& w, int n, int k)
      : N(n),
        K(k),
        lds(int(fp8_scale_stride(k))),
        q(size_t(n) * k),
        s(size_t(fp8_blocks(n)) * fp8_scale_stride(k)) {
    Dev<bf16_t> dw(w);
    TANDEM_CUDA_CHECK(cudaMemset(s.get(), 0, s.size() * 4));
    quantize_weight_fp8(dw.get(), N, K, q.get(), s.get(), lds, nullptr);
    hs = s.floats();
    hq.resize(q.size());
    TANDEM_CUDA_CHECK(cudaMemcpy(hq.data(), q.get(), hq.size(), cudaMemcpyDeviceToHost));
  }
  Fp8Weight view() const { return {q.get(), s.get(), lds}; }
  double at(int n, int k) const { return fp8_block_dequant(hq.data(), hs.data(), lds, K, n, k); }
};

TEST(Fp8Quant, WeightCodesAndScalesMatchHostRule) {
  Rng rng(test_seed() + 1);
  for (auto [N, K] : {std::pair{300, 400}, std::pair{128, 128}, std::pair{896, 640}}) {
    auto w = blocky_weights(rng, N, K);
    w[5] = 0.0f;
    if (N > 256) std::fill(w.begin() + 256 * K, w.begin() + 257 * K, 0.0f);  // part of a block
    Fp8W g(w, N, K);
    std::vector<uint8_t> q(w.size());
    std::vector<float> s(g.hs.size(), 0.0f);
    fp8_block_quantize(w.data(), N, K, q.data(), s.data(), g.lds);
    EXPECT_EQ(g.hq, q) << N << "x" << K;
    EXPECT_EQ(g.hs, s) << N << "x" << K;
  }
}

// Host rows normalised as HF's RMSNorm computes them (fp32 statistics, bf16 roundings).
std::vector<float> host_norm(const std::vector<float>& x, const std::vector<float>& w, int T, int K,
                             float eps) {
  std::vector<float> h(x.size());
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int k = 0; k < K; ++k) ss += double(x[size_t(t) * K + k]) * x[size_t(t) * K + k];
    const float r = float(1.0 / std::sqrt(ss / K + eps));
    for (int k = 0; k < K; ++k)
      h[size_t(t) * K + k] = round_bf16(w[k] * round_bf16(x[size_t(t) * K + k] * r));
  }
  return h;
}

TEST(Fp8Quant, RowCodesAndScalesMatchHostRule) {
  Rng rng(test_seed() + 2);
  const int T = 37, K = 200, G = int(fp8_blocks(K));  // a partial last group
  auto x = random_bf16(rng, size_t(T) * K, 3.0);
  for (int k = 0; k < 128; ++k) x[size_t(3) * K + k] = 0.0f;  // an all-zero group
  Dev<bf16_t> dx(x);
  Dev<uint8_t> q(size_t(T) * K);
  Dev<float> s(size_t(G) * T);
  quantize_rows_fp8(dx.get(), K, T, K, q.get(), s.get(), nullptr);
  std::vector<uint8_t> gq(q.size());
  TANDEM_CUDA_CHECK(cudaMemcpy(gq.data(), q.get(), gq.size(), cudaMemcpyDeviceToHost));
  const auto gs = s.floats();
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) {
      const int n = std::min(128, K - g * 128);
      std::vector<uint8_t> hq(n);
      const float hs = kv_fp8_quantize(&x[size_t(t) * K + g * 128], n, hq.data());
      ASSERT_EQ(gs[size_t(g) * T + t], hs) << t << "," << g;
      for (int i = 0; i < n; ++i) ASSERT_EQ(gq[size_t(t) * K + g * 128 + i], hq[i]);
    }

  // With the norm folded in: the codes read back within e4m3's rounding of HF's norm output
  // (the GPU's rsqrt may differ from the host's in the last bit, so not bit for bit).
  auto nw = random_bf16(rng, K, 0.2, 1.0);
  Dev<bf16_t> dnw(nw);
  quantize_rows_fp8(dx.get(), K, T, K, q.get(), s.get(), nullptr, dnw.get(), 1e-6f);
  TANDEM_CUDA_CHECK(cudaMemcpy(gq.data(), q.get(), gq.size(), cudaMemcpyDeviceToHost));
  const auto ns = s.floats();
  const auto h = host_norm(x, nw, T, K, 1e-6f);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      const float amax = ns[size_t(k / 128) * T + t] * kFp8E4m3Max;
      const float got = fp8_e4m3_to_float(gq[size_t(t) * K + k]) * ns[size_t(k / 128) * T + t];
      const float ref = h[size_t(t) * K + k];
      ASSERT_LE(std::fabs(got - ref), std::fabs(ref) / 15.0f + amax * 1e-3f) << t << "," << k;
    }
}

// Fp8Gemm pads its rows to a multiple of 4 (padded_rows): this cuBLASLt must offer an
// algorithm for every such row count (cuBLASLt 13.1 on the H200 offers exactly those).
TEST(Fp8Quant, BlockScaledRowCountsOffered) {
  if (!Fp8Gemm::supported()) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
  cublasLtHandle_t lt;
  TANDEM_CUBLAS_CHECK(cublasLtCreate(&lt));
  float* sc = nullptr;
  TANDEM_CUDA_CHECK(cudaMalloc(&sc, 1 << 16));
  for (auto [N, K] : {std::pair{640, 640}, std::pair{7168, 5120}}) {
    std::string no, yes;
    for (int T = 1; T <= 300; T += (T < 72 ? 1 : 7)) {
      if (T > 72) T = (T + 3) / 4 * 4;  // past 72: multiples of 4 only
      cublasLtMatmulDesc_t op;
      TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      const auto sa = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      const auto sb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &sa, sizeof(sa));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &sb, sizeof(sb));
      const float* pa = sc;
      const float* pb = sc + 4096;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb));
      cublasLtMatrixLayout_t a, b, c;
      cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, K);
      cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, T, K);
      cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, N, T, N);
      cublasLtMatmulPreference_t pref;
      cublasLtMatmulPreferenceCreate(&pref);
      const size_t ws = size_t(32) << 20;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof(ws));
      cublasLtMatmulHeuristicResult_t h = {};
      int found = 0;
      const cublasStatus_t st =
          cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, 1, &h, &found);
      const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
      (ok ? yes : no) += std::to_string(T) + " ";
      if (T % 4 == 0) {
        EXPECT_TRUE(ok) << "no algorithm for T=" << T << " N=" << N << " K=" << K;
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(a);
      cublasLtMatrixLayoutDestroy(b);
      cublasLtMatrixLayoutDestroy(c);
      cublasLtMatmulDescDestroy(op);
    }
    std::printf("[ perf ] fp8 rows N=%d K=%d: no algorithm for T = %s\n", N, K, no.c_str());
  }
  cudaFree(sc);
  cublasLtDestroy(lt);
}

class Fp8GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Fp8Gemm::supported()) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
  }
};

// The GEMM on quantized rows against double sums of the dequantized operands: N and K with
// odd numbers of 128-blocks (K = 640: 5 blocks, scale rows padded to 8; 2176: 17 -> 20).
TEST_F(Fp8GemmTest, BlockScaledGemmMatchesDequantizedReference) {
  Rng rng(test_seed() + 3);
  Fp8Gemm g(512, 2176);
  for (auto [N, K] : {std::pair{640, 640}, std::pair{384, 2176}, std::pair{896, 640}}) {
    Fp8W w(blocky_weights(rng, N, K), N, K);
    std::vector<double> wd(size_t(N) * K);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) wd[size_t(n) * K + k] = w.at(n, k);
    for (int T : {4, 8, 16, 36, 100, 256}) {  // the library's row counts: multiples of 4
      for (bool acc : {false, true}) {
        auto x = random_bf16(rng, size_t(T) * K, 2.0);
        Dev<bf16_t> dx(x);
        const int G = int(fp8_blocks(K));
        Dev<uint8_t> xq(size_t(T) * K);
        Dev<float> xs(size_t(G) * T);
        quantize_rows_fp8(dx.get(), K, T, K, xq.get(), xs.get(), nullptr);
        std::vector<uint8_t> hq(xq.size());
        TANDEM_CUDA_CHECK(cudaMemcpy(hq.data(), xq.get(), hq.size(), cudaMemcpyDeviceToHost));
        const auto hs = xs.floats();
        std::vector<double> xd(size_t(T) * K);  // the rows as the GEMM reads them
        for (int t = 0; t < T; ++t)
          for (int k = 0; k < K; ++k)
            xd[size_t(t) * K + k] =
                double(fp8_e4m3_to_float(hq[size_t(t) * K + k])) * hs[size_t(k / 128) * T + t];
        auto y0 = random_bf16(rng, size_t(T) * N);
        Dev<bf16_t> dy(y0);
        g.gemm(xq.get(), xs.get(), w.view(), dy.get(), N, T, N, K, nullptr, acc);
        std::vector<double> ref(size_t(T) * N);
        for (int t = 0; t < T; ++t)
          for (int n = 0; n < N; ++n) {
            double sum = acc ? y0[size_t(t) * N + n] : 0.0;
            const double* wr = &wd[size_t(n) * K];
            const double* xr = &xd[size_t(t) * K];
            for (int k = 0; k < K; ++k) sum += xr[k] * wr[k];
            ref[size_t(t) * N + n] = sum;
          }
        const double err = rel_error(dy.floats(), ref);
        EXPECT_LT(err, 6e-3) << "T=" << T << " N=" << N << " K=" << K << " acc=" << acc;
      }
    }
  }
}

// Fp8Gemm's layers against the unquantized-activation reference (dequantized weights times
// the bf16 rows, normalised first where a norm is folded in): the GEMV path (T <= 8) keeps
// the rows in bf16, the GEMM path quantizes them (e4m3: relative error a few 1e-2 a value,
// averaging down over K).
TEST_F(Fp8GemmTest, LinearLayersMatchReference) {
  Rng rng(test_seed() + 4);
  const int H = 640, I = 384, Qd = 896;
  const float eps = 1e-6f;
  Fp8Gemm g(300, 2 * I > H ? 2 * I : H);
  Fp8W wq(blocky_weights(rng, Qd, H), Qd, H);
  Fp8W wgu(blocky_weights(rng, 2 * I, H), 2 * I, H);
  Fp8W wd(blocky_weights(rng, H, I), H, I);
  auto nw = random_bf16(rng, H, 0.2, 1.0);
  Dev<bf16_t> dnw(nw);
  for (int T : {1, 2, 3, 8, 9, 64, 201}) {
    const double tol = T <= g.gemv_max_tokens() ? 8e-3 : 4e-2;
    const int P = Fp8Gemm::padded_rows(T);  // outputs have room for the padded rows
    auto x = random_bf16(rng, size_t(T) * H, 1.5);
    Dev<bf16_t> dx(x);
    const auto h = host_norm(x, nw, T, H, eps);
    auto ref_prod = [&](const std::vector<float>& in, const Fp8W& w, int K, int t, int n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(in[size_t(t) * K + k]) * w.at(n, k);
      return s;
    };
    auto first_rows = [](const std::vector<float>& v, size_t n) {
      return std::vector<float>(v.begin(), v.begin() + n);
    };
    // qkv-like: norm folded in.
    Dev<bf16_t> y(size_t(P) * Qd);
    g.linear(dx.get(), H, wq.view(), y.get(), Qd, T, Qd, H, nullptr, false, dnw.get(), eps);
    std::vector<double> ref(size_t(T) * Qd);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < Qd; ++n) ref[size_t(t) * Qd + n] = ref_prod(h, wq, H, t, n);
    EXPECT_LT(rel_error(first_rows(y.floats(), ref.size()), ref), tol) << "norm T=" << T;

    // gate/up with SwiGLU (norm folded in), then down accumulating into the residual.
    Dev<bf16_t> act(size_t(T) * I), scratch(size_t(P) * 2 * I);
    g.linear_swiglu(dx.get(), wgu.view(), act.get(), scratch.get(), T, I, H, nullptr, dnw.get(),
                    eps);
    std::vector<double> aref(size_t(T) * I);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < I; ++n) {
        const double gg = round_bf16(float(ref_prod(h, wgu, H, t, n)));
        const double uu = round_bf16(float(ref_prod(h, wgu, H, t, I + n)));
        aref[size_t(t) * I + n] = round_bf16(float(gg / (1.0 + std::exp(-gg)))) * uu;
      }
    const auto got_act = act.floats();
    EXPECT_LT(rel_error(got_act, aref), 1.5 * tol) << "swiglu T=" << T;

    std::vector<float> res0(x);
    res0.resize(size_t(P) * H, 0.0f);
    Dev<bf16_t> res(res0);
    g.linear(act.get(), I, wd.view(), res.get(), H, T, H, I, nullptr, /*accumulate=*/true);
    std::vector<double> dref(size_t(T) * H);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < H; ++n)
        dref[size_t(t) * H + n] = x[size_t(t) * H + n] + ref_prod(got_act, wd, I, t, n);
    EXPECT_LT(rel_error(first_rows(res.floats(), dref.size()), dref), tol) << "down T=" << T;
  }
}

// Qwen3-14B's products at decode and prefill row counts: the FP8 layer (row quantization
// included) against the bf16 one, and the ceilings (4.24 TB/s; 1,372 / 777 TFLOP/s).
TEST_F(Fp8GemmTest, Fp8LinearTiming) {
  Rng rng(test_seed() + 5);
  struct Shape {
    const char* name;
    int N, K;
    bool swiglu;
  };
  const int maxT = 4096;
  Fp8Gemm f(maxT, 17408);
  Gemm b(1);
  for (Shape sh : {Shape{"qkv", 7168, 5120, false}, Shape{"o", 5120, 5120, false},
                   Shape{"gate_up", 17408, 5120, true}, Shape{"down", 5120, 17408, false}}) {
    const int rows = sh.swiglu ? 2 * sh.N : sh.N;
    // Enough copies of each weight that they do not stay in the 50 MB L2 between calls.
    const size_t wbytes = size_t(rows) * sh.K;
    const int copies = int((size_t(256) << 20) / wbytes + 1);
    const int lds = int(fp8_scale_stride(sh.K));
    std::vector<std::unique_ptr<Dev<bf16_t>>> wb;
    std::vector<std::unique_ptr<Dev<uint8_t>>> wq;
    std::vector<std::unique_ptr<Dev<float>>> ws;
    const auto host_w = random_bf16(rng, size_t(rows) * sh.K, 0.02);
    for (int c = 0; c < copies; ++c) {
      wb.push_back(std::make_unique<Dev<bf16_t>>(host_w));
      wq.push_back(std::make_unique<Dev<uint8_t>>(wbytes));
      ws.push_back(std::make_unique<Dev<float>>(size_t(fp8_blocks(rows)) * lds));
      quantize_weight_fp8(wb.back()->get(), rows, sh.K, wq.back()->get(), ws.back()->get(), lds,
                          nullptr);
    }
    Dev<bf16_t> x(random_bf16(rng, size_t(maxT) * sh.K));
    Dev<bf16_t> y(size_t(maxT) * rows), act(size_t(maxT) * sh.N);
    for (int T : {1, 4, 8, 16, 32, 64, 128, 256, 512, 4096}) {
      double us8, us16;
      int r8 = 0, r16 = 0;
      auto w8 = [&] {
        const int c = ++r8 % copies;
        return Fp8Weight{wq[size_t(c)]->get(), ws[size_t(c)]->get(), lds};
      };
      auto w16 = [&] { return wb[size_t(++r16 % copies)]->get(); };
      if (sh.swiglu) {
        us8 = time_us(
            [&] { f.linear_swiglu(x.get(), w8(), act.get(), y.get(), T, sh.N, sh.K, nullptr); },
            20);
        us16 = time_us(
            [&] { b.linear_swiglu(x.get(), w16(), act.get(), y.get(), T, sh.N, sh.K, nullptr); },
            20);
      } else {
        us8 = time_us([&] { f.linear(x.get(), sh.K, w8(), y.get(), sh.N, T, sh.N, sh.K, nullptr); },
                      20);
        us16 = time_us([&] { b.linear(x.get(), w16(), y.get(), T, sh.N, sh.K, nullptr); }, 20);
      }
      const double flops = 2.0 * T * double(rows) * sh.K;
      const double bytes8 = double(rows) * sh.K, bytes16 = 2 * bytes8;
      std::printf(
          "[ perf ] fp8 %s T=%d: fp8 %.1f us (%.0f TFLOP/s, %.2f TB/s of weights), bf16 "
          "%.1f us (%.0f TFLOP/s, %.2f TB/s): %.2fx; fp8 ideal %.1f us\n",
          sh.name, T, us8, flops / us8 * 1e-6, bytes8 / us8 * 1e-6, us16, flops / us16 * 1e-6,
          bytes16 / us16 * 1e-6, us16 / us8, std::max(bytes8 / 4.24e6, flops / 1372e6));
      EXPECT_GT(us8, 0.0);
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
