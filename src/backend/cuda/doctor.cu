#include "backend/cuda/doctor.h"

#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "backend/cuda/check.cuh"
#include "core/bf16.h"
#include "core/rng.h"

namespace tandem::cuda {
namespace {

__global__ void axpb_kernel(const float* x, float* y, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

// y = a*x + b on the device for random x; returns the max abs error against the host.
double check_kernel() {
  const int n = 100003;  // odd size: the tail block must be handled
  std::vector<float> x(n), y(n, NAN);
  Rng rng(7);
  for (auto& v : x) v = float(rng.normal());
  float *dx = nullptr, *dy = nullptr;
  TANDEM_CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  TANDEM_CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  TANDEM_CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  TANDEM_CUDA_CHECK(cudaMemset(dy, 0xff, n * sizeof(float)));  // poison: NaN everywhere
  axpb_kernel<<<(n + 255) / 256, 256>>>(dx, dy, n, 3.0f, -0.5f);
  TANDEM_CUDA_CHECK_LAUNCH();
  TANDEM_CUDA_CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  double err = 0;
  for (int i = 0; i < n; ++i) {
    double e = std::fabs(double(y[i]) - (3.0 * x[i] - 0.5));
    err = std::isnan(e) ? INFINITY : std::max(err, e);
  }
  return err;
}

// C[M,N] = A[M,K] * B[K,N] (row-major, bf16 in and out, fp32 accumulate) through cuBLASLt,
// compared with an fp64 host reference. Returns ||C - ref|| / ||ref||.
double check_gemm(int& algos) {
  const int M = 200, N = 136, K = 264;
  std::vector<bf16> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N);
  Rng rng(11);
  for (auto& v : a) v = float_to_bf16(float(rng.normal()));
  for (auto& v : b) v = float_to_bf16(float(rng.normal()));
  void *da, *db, *dc, *ws;
  const size_t ws_size = 32 << 20;
  TANDEM_CUDA_CHECK(cudaMalloc(&da, a.size() * 2));
  TANDEM_CUDA_CHECK(cudaMalloc(&db, b.size() * 2));
  TANDEM_CUDA_CHECK(cudaMalloc(&dc, c.size() * 2));
  TANDEM_CUDA_CHECK(cudaMalloc(&ws, ws_size));
  TANDEM_CUDA_CHECK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  TANDEM_CUDA_CHECK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  TANDEM_CUDA_CHECK(cudaMemset(dc, 0xff, c.size() * 2));

  // Row-major C = A*B is column-major C^T = B^T * A^T: pass B first.
  cublasLtHandle_t lt;
  TANDEM_CUBLAS_CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t lb, la, lc;
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, N, K, N));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, M, K));
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof(ws_size)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, 1, &heur, &found));
  algos = found;
  if (found == 0) return INFINITY;
  float alpha = 1.0f, beta = 0.0f;
  TANDEM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, db, lb, da, la, &beta, dc, lc, dc, lc,
                                     &heur.algo, ws, ws_size, 0));
  TANDEM_CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * 2, cudaMemcpyDeviceToHost));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(ws);

  double num = 0, den = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int k = 0; k < K; ++k)
        ref += double(bf16_to_float(a[size_t(i) * K + k])) * bf16_to_float(b[size_t(k) * N + j]);
      double d = double(bf16_to_float(c[size_t(i) * N + j])) - ref;
      num += d * d;
      den += ref * ref;
    }
  double rel = std::sqrt(num / den);
  return std::isnan(rel) ? INFINITY : rel;
}

}  // namespace

void collect_doctor_facts(DoctorFacts& f) {
  cudaDriverGetVersion(&f.driver_version);
  cudaRuntimeGetVersion(&f.runtime_version);
  f.cublaslt_version = cublasLtGetVersion();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    f.device_error = e == cudaSuccess ? "0 devices" : cudaGetErrorString(e);
    return;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    f.gpus.push_back(
        {p.name, p.major, p.minor, p.multiProcessorCount, size_t(p.l2CacheSize), p.totalGlobalMem});
  }
  TANDEM_CUDA_CHECK(cudaSetDevice(0));
  size_t total = 0;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&f.free_bytes, &total));
  f.kernel_max_err = check_kernel();
  f.gemm_rel_err = check_gemm(f.gemm_algos);
}

}  // namespace tandem::cuda
