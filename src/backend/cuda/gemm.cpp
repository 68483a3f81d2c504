#include "backend/cuda/gemm.h"

#include "backend/cuda/check.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/swiglu.cuh"
#include "core/error.h"

namespace tandem::cuda {

Gemm::Gemm(int gemv_max_tokens, size_t workspace_bytes)
    : workspace_bytes_(workspace_bytes), gemv_max_tokens_(gemv_max_tokens) {
  TANDEM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  TANDEM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
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

// Row-major Y[T,N] is column-major Y^T[N,T] = W (col-major [K,N], transposed) * X^T
// (col-major [K,T]): A = W with TRANSA = T, B = X, m = N, n = T, k = K.
const Gemm::Plan& Gemm::plan(int T, int N, int K, int ldx, int ldy) {
  auto key = std::make_tuple(T, N, K, ldx, ldy);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() > 4096) fail(ErrorKind::kInternal, "gemm: too many distinct shapes");
  Plan p;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, K, N, K));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, K, T, ldx));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, N, T, ldy));
  cublasLtMatmulPreference_t pref;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref, 1, &heur, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0)
    fail(ErrorKind::kUnsupported, "cuBLASLt has no bf16 algorithm for T={} N={} K={}", T, N, K);
  p.algo = heur.algo;
  return plans_.emplace(key, p).first->second;
}

void Gemm::cublas_linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T,
                         int N, int K, cudaStream_t stream, int ldx, int ldy) {
  if (T <= 0) return;
  if (ldx == 0) ldx = K;
  if (ldy == 0) ldy = N;
  const Plan& p = plan(T, N, K, ldx, ldy);
  const float alpha = 1.0f, beta = 0.0f;
  TANDEM_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, W, p.a, X, p.b, &beta, Y, p.c, Y, p.c,
                                     &p.algo, workspace_, workspace_bytes_, stream));
}

void Gemm::linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T, int N,
                  int K, cudaStream_t stream, int ldx, int ldy) {
  if (T <= 0) return;
  if (T <= gemv_max_tokens_ && T <= kGemvMaxTokens && K % 8 == 0 && (ldx == 0 || ldx % 8 == 0)) {
    gemv(X, ldx ? ldx : K, W, Y, ldy ? ldy : N, T, N, K, stream);
    return;
  }
  cublas_linear(X, W, Y, T, N, K, stream, ldx, ldy);
}

void Gemm::linear_swiglu(const __nv_bfloat16* X, const __nv_bfloat16* W_gate_up, __nv_bfloat16* act,
                         __nv_bfloat16* scratch, int T, int I, int K, cudaStream_t stream) {
  if (T <= 0) return;
  if (T <= gemv_max_tokens_ && T <= kGemvMaxTokens && K % 8 == 0) {
    gemv(X, K, W_gate_up, act, I, T, I, K, stream, /*swiglu=*/true);
    return;
  }
  cublas_linear(X, W_gate_up, scratch, T, 2 * I, K, stream);
  swiglu(scratch, act, T, I, stream);
}

}  // namespace tandem::cuda
