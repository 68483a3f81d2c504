#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/embedding.cuh"

namespace tandem::cuda {
namespace {

__global__ void gather_rows_kernel(const int32_t* rows, const bf16_t* table, bf16_t* out,
                                   int dim8) {
  const int i = blockIdx.x;
  const int4* src = reinterpret_cast<const int4*>(table) + size_t(rows[i]) * dim8;
  int4* dst = reinterpret_cast<int4*>(out) + size_t(i) * dim8;
  for (int c = threadIdx.x; c < dim8; c += blockDim.x) dst[c] = src[c];
}

}  // namespace

void gather_rows(const int32_t* rows, const bf16_t* table, bf16_t* out, int n, int dim,
                 cudaStream_t stream) {
  if (n <= 0) return;
  const int dim8 = dim / 8;
  const int threads = dim8 >= 256 ? 256 : ((dim8 + 31) / 32) * 32;
  gather_rows_kernel<<<n, threads, 0, stream>>>(rows, table, out, dim8);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
