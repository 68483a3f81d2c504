#pragma once
// Every CUDA and cuBLASLt call is checked; a failure becomes a tandem::Error naming the call.
// Device code cannot include fmt (nvcc rejects its consteval checks), so the error is built
// by cuda_fail(), compiled by the host compiler.
#include <cublasLt.h>
#include <cuda_runtime.h>

namespace tandem::cuda {
[[noreturn]] void cuda_fail(const char* expr, const char* what, const char* file, int line);
}

#define TANDEM_CUDA_CHECK(expr)                                                     \
  do {                                                                              \
    cudaError_t _e = (expr);                                                        \
    if (_e != cudaSuccess)                                                          \
      ::tandem::cuda::cuda_fail(#expr, cudaGetErrorString(_e), __FILE__, __LINE__); \
  } while (0)

#define TANDEM_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                   \
    cublasStatus_t _s = (expr);                                                          \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                     \
      ::tandem::cuda::cuda_fail(#expr, cublasLtGetStatusString(_s), __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define TANDEM_CUDA_CHECK_LAUNCH() TANDEM_CUDA_CHECK(cudaGetLastError())
