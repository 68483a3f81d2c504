#include <algorithm>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/swiglu.cuh"

namespace tandem::cuda {
namespace {

__global__ void swiglu_kernel(const bf16_t* gu, bf16_t* out, int T, int inter8) {
  const size_t n = size_t(T) * inter8;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / inter8, c = i % inter8;
    const int4* row = reinterpret_cast<const int4*>(gu) + t * 2 * inter8;
    float g[8], u[8];
    unpack8(row[c], g);
    unpack8(row[inter8 + c], u);
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = swiglu_bf16(g[k], u[k]);
    reinterpret_cast<int4*>(out)[i] = pack8(g);
  }
}

}  // namespace

void swiglu(const bf16_t* gate_up, bf16_t* out, int T, int inter, cudaStream_t stream) {
  if (T <= 0) return;
  const size_t n = size_t(T) * (inter / 8);
  const int threads = 256;
  const int blocks = int(std::min<size_t>((n + threads - 1) / threads, 132 * 16));
  swiglu_kernel<<<blocks, threads, 0, stream>>>(gate_up, out, T, inter / 8);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
