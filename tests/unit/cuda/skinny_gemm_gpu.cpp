// The tensor-core skinny GEMM (decode batches of up to 64 rows) against a double-precision
// CPU loop, at odd sizes, for every plan form (block sizes, pipeline depths, K splits),
// plus its timing against cuBLASLt at Qwen3-14B's decode shapes.
#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <string>

#include "backend/cuda/fill.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/skinny_gemm.cuh"
#include "backend/cuda/swiglu.cuh"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

int num_sms() {
  int dev = 0, sms = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Y = X W^T (or its SwiGLU form; with accumulate Y += X W^T) for one plan; checks against the
// CPU and that a second run gives the same bits.
void check(Rng& rng, int T, int N, int K, int ldx, int ldy, bool swiglu, SkinnyPlan plan,
           bool accumulate = false) {
  const int rows = swiglu ? 2 * N : N;
  auto x = random_bf16(rng, size_t(T) * ldx);
  auto w = random_bf16(rng, size_t(rows) * K, 1.5 / std::sqrt(double(K)));
  // Accumulating: the old Y holds random values in its N columns, poison past them.
  std::vector<float> y0(size_t(T) * ldy, std::numeric_limits<float>::quiet_NaN());
  if (accumulate)
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) y0[size_t(t) * ldy + n] = round_bf16(float(rng.normal()));
  Dev<bf16_t> dx(x), dw(w), dy(size_t(T) * ldy);
  if (accumulate) dy.upload(y0);
  skinny_gemm(dx.get(), ldx, dw.get(), dy.get(), ldy, T, N, K, swiglu, plan, nullptr, -1.0f,
              accumulate);
  const auto y = dy.floats();
  std::vector<float> got;
  std::vector<double> ref;
  auto dot = [&](int t, int r) {
    double a = 0;
    for (int k = 0; k < K; ++k) a += double(x[size_t(t) * ldx + k]) * w[size_t(r) * K + k];
    return a;
  };
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      if (swiglu) {
        const double g = dot(t, n), u = dot(t, N + n);
        ref.push_back(g / (1 + std::exp(-g)) * u);
      } else {
        ref.push_back(dot(t, n) + (accumulate ? double(y0[size_t(t) * ldy + n]) : 0.0));
      }
      got.push_back(y[size_t(t) * ldy + n]);
    }
  const std::string what = "T " + std::to_string(T) + " N " + std::to_string(N) + " K " +
                           std::to_string(K) + (swiglu ? " swiglu" : "") + " plan " +
                           std::to_string(plan.nw) + "/" + std::to_string(plan.splits) + "r" +
                           std::to_string(plan.rot) + (accumulate ? " accumulate" : "");
  EXPECT_LT(rel_error(got, ref), swiglu ? 1e-2 : 6e-3) << what;
  // Columns past N in the padded rows stay untouched (poison).
  if (ldy > N) {
    EXPECT_FALSE(std::isfinite(y[size_t(N)])) << what;
  }
  if (accumulate) dy.upload(y0);
  skinny_gemm(dx.get(), ldx, dw.get(), dy.get(), ldy, T, N, K, swiglu, plan, nullptr, -1.0f,
              accumulate);
  const auto y2 = dy.floats();
  EXPECT_EQ(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)), 0) << what << " rerun";
}

// On GPUs without sm_90a code the kernel is refused, never run with an empty body.
void expect_refused() {
  Dev<bf16_t> x(size_t(16) * 64), w(size_t(64) * 64), y(size_t(16) * 64);
  EXPECT_THROW(
      skinny_gemm(x.get(), 64, w.get(), y.get(), 64, 16, 64, 64, false, SkinnyPlan{}, nullptr),
      std::exception);
}

TEST(CudaKernels, SkinnyGemmMatchesCpu) {
  if (!skinny_supported()) return expect_refused();
  Rng rng(test_seed() + 41);
  const int sms = num_sms();
  // N = 1002 is not a whole number of tiles, K = 1160 not of 32-wide slices.
  for (int T : {1, 9, 16, 17, 40, 64}) {
    check(rng, T, 1002, 1160, 1160, 1002, false, skinny_plan(1002, 1160, T, sms, false));
    check(rng, T, 1002, 1160, 1168, 1010, false, {80, 1, 0});
    check(rng, T, 1002, 1160, 1160, 1002, false, {144, 3, 0});
    check(rng, T, 1002, 1160, 1160, 1002, false, {80, 4, 5});
  }
  for (int T : {5, 33, 64}) {
    check(rng, T, 344, 648, 648, 344, true, skinny_plan(688, 648, T, sms, true));
    check(rng, T, 344, 648, 648, 344, true, {80, 2, 1});
    check(rng, T, 344, 648, 656, 352, true, {144, 3, 3});
  }
  check(rng, 64, 8, 8, 8, 8, false, {80, 1, 0});  // one 8-wide K slice, one partial tile
  // The residual add: one block a tile, and K split over a cluster (each block adds its rows).
  for (int T : {3, 17, 64, 100}) {
    check(rng, T, 1002, 1160, 1160, 1010, false, {80, 1, 0}, true);
    check(rng, T, 1002, 1160, 1168, 1002, false, {144, 3, 5}, true);
    check(rng, T, 1002, 1160, 1160, 1002, false, skinny_plan(1002, 1160, T, sms, false), true);
  }
  // Two 64-row X tiles (the second one partial) sharing each weight stage.
  for (int T : {65, 100, 128}) {
    check(rng, T, 1002, 1160, 1160, 1002, false, skinny_plan(1002, 1160, T, sms, false));
    check(rng, T, 1002, 1160, 1168, 1010, false, {144, 1, 0});
    check(rng, T, 1002, 1160, 1160, 1002, false, {80, 3, 5});
    check(rng, T, 344, 648, 656, 352, true, {144, 3, 3});
    check(rng, T, 344, 648, 648, 344, true, skinny_plan(688, 648, T, sms, true));
  }
  EXPECT_TRUE(skinny_plan_fits({80, 1, 1}, 128));
  EXPECT_FALSE(skinny_plan_fits({144, 1, 1}, 129));
  EXPECT_FALSE(skinny_plan_fits({96, 1, 1}, 64));
}

// Decode shapes of Qwen3-14B: the library against the skinny kernel's automatic plan and the
// best plans of a sweep. Weights rotate over copies worth >= 256 MB, so none stays in L2, and
// a one-element kernel runs between products: in a model other work follows each product, so
// the next product's start (programmatic dependent launch) must not overlap this one.
TEST(CudaKernels, SkinnyGemmTiming) {
  if (!skinny_supported()) return expect_refused();
  Rng rng(test_seed() + 42);
  const int sms = num_sms();
  struct Shape {
    const char* name;
    int N, K;
    bool swiglu, acc;  // acc: the model adds the product into the residual stream
  };
  Gemm lib(0);
  for (Shape sh :
       {Shape{"qkv", 7168, 5120, false, false}, Shape{"o", 5120, 5120, false, true},
        Shape{"gate_up", 17408, 5120, true, false}, Shape{"down", 5120, 17408, false, true},
        Shape{"lm_head", 151936, 5120, false, false}}) {
    const int rows = sh.swiglu ? 2 * sh.N : sh.N;
    const size_t wbytes = size_t(rows) * sh.K * 2;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / wbytes + 1));
    std::vector<std::unique_ptr<Dev<bf16_t>>> ws;
    auto w = random_bf16(rng, size_t(rows) * sh.K, 0.02);
    for (int c = 0; c < copies; ++c) ws.push_back(std::make_unique<Dev<bf16_t>>(w));
    for (int T : {128, 96, 64, 32, 16, 8}) {
      auto x = random_bf16(rng, size_t(T) * sh.K);
      Dev<bf16_t> dx(x), dy(std::vector<float>(size_t(T) * sh.N, 0.0f)), dgu(size_t(T) * rows),
          dsep(1);
      int rep = 0;
      // One product on the next weight copy, then the separator kernel.
      auto time_rotating = [&](auto&& fn) {
        return time_us(
            [&] {
              fn(ws[size_t(++rep % copies)]->get());
              fill_constant(dsep.get(), 1, 0.0f, nullptr);
            },
            30);
      };
      const double t_lib = time_rotating([&](const bf16_t* W) {
        if (sh.swiglu) {
          lib.cublas_linear(dx.get(), W, dgu.get(), T, rows, sh.K, nullptr);
          swiglu(dgu.get(), dy.get(), T, sh.N, nullptr);
        } else {
          lib.cublas_linear(dx.get(), W, dy.get(), T, sh.N, sh.K, nullptr, 0, 0, sh.acc);
        }
      });
      auto run_plan = [&](SkinnyPlan p) {
        return time_rotating([&](const bf16_t* W) {
          skinny_gemm(dx.get(), sh.K, W, dy.get(), sh.N, T, sh.N, sh.K, sh.swiglu, p, nullptr,
                      -1.0f, sh.acc);
        });
      };
      const SkinnyPlan ap = skinny_plan(rows, sh.K, T, sms, sh.swiglu);
      const double t_auto = run_plan(ap);
      struct Row {
        double us;
        SkinnyPlan p;
      };
      std::vector<Row> sweep;
      for (int nw : {80, 144})
        for (int splits : {1, 2, 3, 4})
          for (int rot : {0, 1, 5, 13}) {
            const SkinnyPlan p{nw, splits, rot};
            if (skinny_plan_fits(p, T)) sweep.push_back({run_plan(p), p});
          }
      std::sort(sweep.begin(), sweep.end(), [](const Row& a, const Row& b) { return a.us < b.us; });
      auto tbs = [&](double us) { return (wbytes + double(T) * sh.K * 2) / us * 1e-6; };
      std::printf(
          "[ perf ] skinny %s T=%d (%d x %d%s): cuBLASLt%s %.1f us %.2f TB/s; auto "
          "%d/%dr%d %.1f us %.2f TB/s (%.2fx)",
          sh.name, T, rows, sh.K,
          sh.swiglu ? ", SwiGLU"
          : sh.acc  ? ", accumulate"
                    : "",
          sh.swiglu ? "+SwiGLU" : "", t_lib, tbs(t_lib), ap.nw, ap.splits, ap.rot, t_auto,
          tbs(t_auto), t_lib / t_auto);
      for (size_t i = 0; i < std::min<size_t>(5, sweep.size()); ++i)
        std::printf("%s %d/%dr%d %.1f", i ? "," : "; best", sweep[i].p.nw, sweep[i].p.splits,
                    sweep[i].p.rot, sweep[i].us);
      std::printf(" us\n");
      EXPECT_GT(t_auto, 0.0);
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
