#include "backend/cuda/gemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/check.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/rmsnorm.cuh"
#include "backend/cuda/swiglu.cuh"
#include "core/error.h"

namespace tandem::cuda {

Gemm::Gemm(int gemv_max_tokens, size_t workspace_bytes)
    : workspace_bytes_(workspace_bytes), gemv_max_tokens_(gemv_max_tokens) {
  if (const char* e = std::getenv("TANDEM_GEMM_TUNE"); e && std::string_view(e) == "1")
    choice_ = Choice::kTimed;
  if (const char* e = std::getenv("TANDEM_GEMM_FIRST_T"); e && std::string_view(e) == "1")
    query_first_t_ = true;
  if (const char* e = std::getenv("TANDEM_SKINNY"); e && std::string_view(e) == "0")
    skinny_max_tokens_ = 0;
  if (const char* e = std::getenv("TANDEM_SKINNY_MIN_TOKENS")) skinny_min_tokens_ = std::atoi(e);
  if (const char* e = std::getenv("TANDEM_SKINNY_MAX_TOKENS"))
    skinny_max_tokens_ = std::min(std::atoi(e), kSkinnyMaxTokens);
  if (const char* e = std::getenv("TANDEM_SKINNY_LINEAR")) {  // "min:max[:min_MiB]"
    int lo = 0, hi = 0, mib = -1;
    if (std::sscanf(e, "%d:%d:%d", &lo, &hi, &mib) >= 2) {
      skinny_linear_min_ = lo;
      skinny_linear_max_ = std::min(hi, kSkinnyMaxTokens);
      if (mib >= 0) skinny_linear_min_bytes_ = size_t(mib) << 20;
    }
  }
  TANDEM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  TANDEM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  int dev = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
  skinny_ok_ = skinny_supported();  // runs a probe kernel: never inside a graph capture
}

Gemm::~Gemm() {
  for (auto& [k, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(lt_);
}

int Gemm::bucket(int T) {
  if (T <= 16) return T;
  const int step = T <= 128 ? 16 : T <= 512 ? 32 : T <= 2048 ? 64 : 256;
  return (T + step - 1) / step * step;
}

// Row-major Y[T,N] is column-major Y^T[N,T] = W (col-major [K,N], transposed) * X^T
// (col-major [K,T]): A = W with TRANSA = T, B = X, m = N, n = T, k = K.
void Gemm::init_plan(Plan& p, int k, int T, int N, int ldw, int ldx, int ldy) {
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, N, ldw));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, T, ldx));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, N, T, ldy));
  p.T = T;
}

Gemm::Plan& Gemm::plan(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y,
                       const PlanKey& key, int T, cudaStream_t stream) {
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    Plan& p = it->second;
    set_cols(p, T);  // same bucket, maybe another T: only the n extent of B and C changes
    return p;
  }
  if (plans_.size() > (1u << 16)) fail(ErrorKind::kInternal, "gemm: too many distinct shapes");
  const auto [Tk, N, K, ldx, ldy, acc] = key;
  Plan p;
  init_plan(p, K, T, N, K, ldx, ldy);
  // The algorithm is chosen for the bucket's largest T: one chosen for the first T seen can
  // tile rows so tightly that a slightly larger T of the same bucket needs a whole extra
  // wave of tiles (H200: a 463-row step's GEMMs took 22.0 ms instead of 17.8).
  choose(p, X, W, Y, T, N, K, stream, query_first_t_ ? T : std::max(T, Tk), acc);
  return plans_.emplace(key, p).first->second;
}

void set_layout_rows(cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int T) {
  const uint64_t cols = uint64_t(T);
  TANDEM_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(b, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(c, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
}

void Gemm::set_cols(Plan& p, int T) {
  if (p.T == T) return;
  set_layout_rows(p.b, p.c, T);
  p.T = T;
}

cublasStatus_t Gemm::run(const Plan& p, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* X,
                         const __nv_bfloat16* W, void* Y, cudaStream_t stream, bool accumulate) {
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(lt_, p.op, &alpha, W, p.a, X, p.b, &beta, Y, p.c, Y, p.c, &algo, workspace_,
                        workspace_bytes_, stream);
}

// The library's top candidates for T_query rows (>= T); outside graph capture, and where Y is
// not also an input, each is timed on the real operands at T rows (the result is recomputed
// by the caller) and the fastest is kept.
void Gemm::choose(Plan& p, const __nv_bfloat16* X, const __nv_bfloat16* W, void* Y, int T, int N,
                  int K, cudaStream_t stream, int T_query, bool accumulate) {
  constexpr int kCandidates = 8;
  cublasLtMatmulPreference_t pref;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t heur[kCandidates] = {};
  int found = 0;
  set_cols(p, T_query);
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref,
                                                           kCandidates, heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  set_cols(p, T);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
    fail(ErrorKind::kUnsupported, "cuBLASLt has no bf16 algorithm for T={} N={} K={}", T, N, K);
  p.algo = heur[0].algo;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  TANDEM_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  if (choice_ != Choice::kTimed || found == 1 || accumulate || cs != cudaStreamCaptureStatusNone)
    return;

  cudaEvent_t e0, e1;
  TANDEM_CUDA_CHECK(cudaEventCreate(&e0));
  TANDEM_CUDA_CHECK(cudaEventCreate(&e1));
  float best = 1e30f, first = -1.0f;
  int best_i = 0;
  for (int i = 0; i < found; ++i) {
    if (heur[i].state != CUBLAS_STATUS_SUCCESS) continue;
    if (run(p, heur[i].algo, X, W, Y, stream, false) != CUBLAS_STATUS_SUCCESS) continue;  // warm-up
    float t = 1e30f;
    for (int rep = 0; rep < 2; ++rep) {
      TANDEM_CUDA_CHECK(cudaEventRecord(e0, stream));
      if (run(p, heur[i].algo, X, W, Y, stream, false) != CUBLAS_STATUS_SUCCESS) break;
      TANDEM_CUDA_CHECK(cudaEventRecord(e1, stream));
      TANDEM_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t = std::min(t, ms);
    }
    if (i == 0) first = t;
    if (t < best) best = t, best_i = i;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  p.algo = heur[best_i].algo;
  tune_log_.push_back({T, N, K, found, first, best});
}

void Gemm::cublas_linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T,
                         int N, int K, cudaStream_t stream, int ldx, int ldy, bool accumulate) {
  if (T <= 0) return;
  if (ldx == 0) ldx = K;
  if (ldy == 0) ldy = N;
  Plan& p = plan(X, W, Y, {bucket(T), N, K, ldx, ldy, accumulate}, T, stream);
  cublasStatus_t st = run(p, p.algo, X, W, Y, stream, accumulate);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The bucket's algorithm does not take this T: the library's choice for this exact
    // shape, asked once.
    ++exact_fallbacks_;
    const PlanKey key{T, N, K, ldx, ldy, accumulate};
    auto it = exact_.find(key);
    if (it == exact_.end()) {
      Plan e = p;
      choose(e, X, W, Y, T, N, K, stream, T, accumulate);
      it = exact_.emplace(key, e.algo).first;
    }
    st = run(p, it->second, X, W, Y, stream, accumulate);
  }
  TANDEM_CUBLAS_CHECK(st);
}

bool Gemm::skinny(const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, __nv_bfloat16* Y,
                  int ldy, int T, int N, int K, bool swiglu, cudaStream_t stream, float norm_eps,
                  bool accumulate) {
  const int lo = swiglu ? skinny_min_tokens_ : skinny_linear_min_;
  const int hi = swiglu ? skinny_max_tokens_ : skinny_linear_max_;
  const size_t rows = swiglu ? size_t(2) * N : size_t(N);
  if (!skinny_ok_ || T < lo || T > hi || T > kSkinnyMaxTokens || N % 2 || K % 8 || ldx % 8 ||
      ldy % 2 ||
      rows * K * sizeof(__nv_bfloat16) < (swiglu ? skinny_min_bytes_ : skinny_linear_min_bytes_))
    return false;
  const auto key = std::make_tuple(T, N, K, swiglu);
  auto it = skinny_plans_.find(key);
  if (it == skinny_plans_.end())  // a shape's first use runs outside graph capture
    it = skinny_plans_.emplace(key, skinny_plan(int(rows), K, T, sms_, swiglu)).first;
  skinny_gemm(X, ldx, W, Y, ldy, T, N, K, swiglu, it->second, stream, norm_eps, accumulate);
  return true;
}

void Gemm::linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T, int N,
                  int K, cudaStream_t stream, int ldx, int ldy, bool accumulate) {
  if (T <= 0) return;
  if (T <= gemv_max_tokens_ && T <= kGemvMaxTokens && K % 8 == 0 && (ldx == 0 || ldx % 8 == 0)) {
    gemv(X, ldx ? ldx : K, W, Y, ldy ? ldy : N, T, N, K, stream, /*swiglu=*/false, accumulate);
    return;
  }
  if (skinny(X, ldx ? ldx : K, W, Y, ldy ? ldy : N, T, N, K, /*swiglu=*/false, stream, -1.0f,
             accumulate))
    return;
  cublas_linear(X, W, Y, T, N, K, stream, ldx, ldy, accumulate);
}

void Gemm::linear_swiglu(const __nv_bfloat16* X, const __nv_bfloat16* W_gate_up, __nv_bfloat16* act,
                         __nv_bfloat16* scratch, int T, int I, int K, cudaStream_t stream,
                         const RowNorm* norm) {
  if (T <= 0) return;
  const bool gemv_rows = T <= gemv_max_tokens_ && T <= kGemvMaxTokens && K % 8 == 0;
  if (norm && gemv_rows && T <= 2) {
    // The GEMV reads the normalised rows in fp32 (no bf16 unpacking in its loop).
    float* hf = reinterpret_cast<float*>(norm->h);
    rmsnorm_f32(X, hf, T, K, norm->eps, stream);
    gemv_swiglu_f32x(hf, K, W_gate_up, act, I, T, I, K, stream);
    return;
  }
  if (!gemv_rows &&
      skinny(X, K, W_gate_up, act, I, T, I, K, /*swiglu=*/true, stream, norm ? norm->eps : -1.0f))
    return;
  if (norm) {
    rmsnorm(X, nullptr, norm->h, T, K, norm->eps, stream);
    X = norm->h;
  }
  if (gemv_rows) {
    gemv(X, K, W_gate_up, act, I, T, I, K, stream, /*swiglu=*/true);
    return;
  }
  cublas_linear(X, W_gate_up, scratch, T, 2 * I, K, stream);
  swiglu(scratch, act, T, I, stream);
}

}  // namespace tandem::cuda
