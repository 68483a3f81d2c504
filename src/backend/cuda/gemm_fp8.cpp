#include "backend/cuda/gemm_fp8.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/check.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv_fp8.cuh"
#include "backend/cuda/rmsnorm.cuh"
#include "backend/cuda/swiglu.cuh"
#include "core/error.h"

namespace tandem::cuda {
namespace {

constexpr int kGroup = 128;

int groups(int K) {
  return (K + kGroup - 1) / kGroup;
}

// Y^T[N, T] (column-major) = W^T (A: [K, N] column-major, transposed; 128 x 128 block scales)
// times X^T (B: [K, T] column-major; one scale per 128 values of a column), fp32 accumulate,
// bf16 out.
void init_plan(cublasLtMatmulDesc_t& op, cublasLtMatrixLayout_t& a, cublasLtMatrixLayout_t& b,
               cublasLtMatrixLayout_t& c, int T, int N, int K, int ldy) {
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtMatmulMatrixScale_t sa = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                    sb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &sa, sizeof(sa)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &sb, sizeof(sb)));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, K));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, T, K));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, N, T, ldy));
}

void set_scales(cublasLtMatmulDesc_t op, const float* ws, const float* xs) {
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof(ws)));
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xs, sizeof(xs)));
}

}  // namespace

namespace {
std::string& probe_note() {
  static std::string note;
  return note;
}
}  // namespace

const std::string& Fp8Gemm::unsupported_reason() {
  supported();
  return probe_note();
}

bool Fp8Gemm::supported() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      probe_note() = "no CUDA device";
      return false;
    }
    if (major != 9 || cublasLtGetVersion() < 120900) {
      probe_note() =
          fmt::format("compute capability {}.{}, cuBLASLt {}", major, minor, cublasLtGetVersion());
      return false;
    }
    cublasLtHandle_t lt = nullptr;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return false;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    const int T = 64, N = 256, K = 256;
    init_plan(op, a, b, c, T, N, K, N);
    float* scales = nullptr;  // the library may want the scale pointers set to choose
    TANDEM_CUDA_CHECK(cudaMalloc(&scales, 4096));
    set_scales(op, scales, scales + 512);
    cublasLtMatmulPreference_t pref;
    TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = size_t(32) << 20;  // the kernels want a workspace
    TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t h{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, 1, &h, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
      probe_note() = fmt::format("cuBLASLt {} found {} block-scaled FP8 algorithms ({})",
                                 cublasLtGetVersion(), found, cublasLtGetStatusString(st));
    cublasLtMatmulPreferenceDestroy(pref);
    cudaFree(scales);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    return st == CUBLAS_STATUS_SUCCESS && found > 0;
  }();
  return ok;
}

Fp8Gemm::Fp8Gemm(int max_rows, int max_k, size_t workspace_bytes)
    : workspace_bytes_(workspace_bytes), max_rows_(max_rows), max_k_(max_k) {
  if (max_rows < 1 || max_k < 16 || max_k % 16)
    fail(ErrorKind::kInvalidArgument, "fp8 gemm: max_rows >= 1 and max_k a multiple of 16");
  // H200, Qwen3-14B shapes, decode steps with FP8 weights: the GEMV (tensor-core form from 3
  // rows) against row quantization + the GEMM, same call: b=4 607 against 532 tok/s, b=8
  // 1,164 against 1,043; from 12 rows the GEMM wins (b=12 1,566 against 1,469, b=16 2,079
  // against 1,884).
  gemv_max_ = 8;
  if (const char* e = std::getenv("TANDEM_FP8_GEMV_MAX")) set_gemv_max_tokens(std::atoi(e));
  TANDEM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  TANDEM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  const size_t rows = size_t(padded_rows(max_rows));
  TANDEM_CUDA_CHECK(cudaMalloc(&xq_, rows * max_k));
  TANDEM_CUDA_CHECK(cudaMalloc(&xs_, size_t(groups(max_k)) * rows * sizeof(float)));
  TANDEM_CUDA_CHECK(cudaMalloc(&h_, size_t(kGemvFp8MaxTokens) * max_k * sizeof(__nv_bfloat16)));
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [k, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(h_);
  cudaFree(xs_);
  cudaFree(xq_);
  cudaFree(workspace_);
  cublasLtDestroy(lt_);
}

void Fp8Gemm::set_gemv_max_tokens(int t) {
  gemv_max_ = std::clamp(t, 0, kGemvFp8MaxTokens);
}

void Fp8Gemm::set_cols(Plan& p, int T) {
  if (p.T == T) return;
  set_layout_rows(p.b, p.c, T);
  p.T = T;
}

bool Fp8Gemm::choose(Plan& p, int T_query) {
  const int T = p.T;
  set_cols(p, T_query);
  cublasLtMatmulPreference_t pref;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref, 1, &h, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  set_cols(p, T);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  p.algo = h.algo;
  return true;
}

// As Gemm's plans: one per bucket of T, the algorithm chosen for the bucket's largest T.
Fp8Gemm::Plan& Fp8Gemm::plan(const Key& key, int T, const float* ws, const float* xs) {
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    set_cols(it->second, T);
    return it->second;
  }
  const auto [Tb, N, K, ldy, acc] = key;
  Plan p;
  init_plan(p.op, p.a, p.b, p.c, T, N, K, ldy);
  set_scales(p.op, ws, xs);
  p.T = T;
  if (!choose(p, std::max(T, Tb)) && !choose(p, T))
    fail(ErrorKind::kUnsupported,
         "cuBLASLt has no block-scaled FP8 algorithm for T={} N={} K={} (needs Hopper and "
         "cuBLASLt >= 12.9)",
         T, N, K);
  return plans_.emplace(key, p).first->second;
}

void Fp8Gemm::gemm(const uint8_t* xq, const float* xs, const Fp8Weight& W, __nv_bfloat16* Y,
                   int ldy, int T, int N, int K, cudaStream_t stream, bool accumulate) {
  if (T <= 0) return;
  if (T % 4) cuda_fail("Fp8Gemm::gemm", "T must be a multiple of 4", __FILE__, __LINE__);
  if (ldy == 0) ldy = N;
  Plan& p = plan({Gemm::bucket(T), N, K, ldy, accumulate}, T, W.s, xs);
  set_scales(p.op, W.s, xs);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  cublasStatus_t st = cublasLtMatmul(lt_, p.op, &alpha, W.q, p.a, xq, p.b, &beta, Y, p.c, Y, p.c,
                                     &p.algo, workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // the bucket's algorithm refuses this exact T
    Plan& e = plan({T, N, K, ldy, accumulate}, T, W.s, xs);
    set_scales(e.op, W.s, xs);
    st = cublasLtMatmul(lt_, e.op, &alpha, W.q, e.a, xq, e.b, &beta, Y, e.c, Y, e.c, &e.algo,
                        workspace_, workspace_bytes_, stream);
  }
  TANDEM_CUBLAS_CHECK(st);
}

int Fp8Gemm::quantize(const __nv_bfloat16* X, int ldx, int T, int K, cudaStream_t stream,
                      const __nv_bfloat16* norm_w, float eps) {
  const int rows = padded_rows(T);
  if (rows > padded_rows(max_rows_) || K > max_k_)
    fail(ErrorKind::kInternal, "fp8 gemm: {} rows of {} beyond the scratch ({} of {})", T, K,
         max_rows_, max_k_);
  quantize_rows_fp8(X, ldx, T, K, xq_, xs_, stream, norm_w, eps, rows);
  return rows;
}

void Fp8Gemm::linear(const __nv_bfloat16* X, int ldx, const Fp8Weight& W, __nv_bfloat16* Y, int ldy,
                     int T, int N, int K, cudaStream_t stream, bool accumulate,
                     const __nv_bfloat16* norm_w, float eps) {
  if (T <= 0) return;
  if (ldx == 0) ldx = K;
  if (ldy == 0) ldy = N;
  if (T <= gemv_max_) {
    if (norm_w) {
      rmsnorm(X, norm_w, h_, T, K, eps, stream);  // ldx == K for normalised inputs
      X = h_, ldx = K;
    }
    gemv_fp8(X, ldx, W.q, W.s, W.lds, Y, ldy, T, N, K, stream, /*swiglu=*/false, accumulate);
    return;
  }
  gemm(xq_, xs_, W, Y, ldy, quantize(X, ldx, T, K, stream, norm_w, eps), N, K, stream, accumulate);
}

void Fp8Gemm::linear_swiglu(const __nv_bfloat16* X, const Fp8Weight& W_gate_up, __nv_bfloat16* act,
                            __nv_bfloat16* scratch, int T, int I, int K, cudaStream_t stream,
                            const __nv_bfloat16* norm_w, float eps) {
  if (T <= 0) return;
  if (T <= gemv_max_) {
    if (norm_w) {
      rmsnorm(X, norm_w, h_, T, K, eps, stream);
      X = h_;
    }
    gemv_fp8(X, K, W_gate_up.q, W_gate_up.s, W_gate_up.lds, act, I, T, I, K, stream,
             /*swiglu=*/true);
    return;
  }
  gemm(xq_, xs_, W_gate_up, scratch, 2 * I, quantize(X, K, T, K, stream, norm_w, eps), 2 * I, K,
       stream);
  swiglu(scratch, act, T, I, stream);
}

}  // namespace tandem::cuda
