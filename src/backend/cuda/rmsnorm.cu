#include <algorithm>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/rmsnorm.cuh"

namespace tandem::cuda {
namespace {

// One block per row. The row is read twice (sum of squares, then scale); the second read
// hits L1/L2.
__global__ void rmsnorm_kernel(const bf16_t* x, const bf16_t* w, bf16_t* out, int dim, float eps) {
  __shared__ float scratch[32];
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int dim8 = dim / 8;
  const int4* xr = reinterpret_cast<const int4*>(x) + size_t(blockIdx.x) * dim8;
  const float r = block_row_rms(x + size_t(blockIdx.x) * dim, dim, eps, scratch);
  const int4* wr = reinterpret_cast<const int4*>(w);
  int4* orow = reinterpret_cast<int4*>(out) + size_t(blockIdx.x) * dim8;
  for (int c = threadIdx.x; c < dim8; c += blockDim.x) {
    float v[8], g[8];
    unpack8(xr[c], v);
    if (wr) {
      unpack8(wr[c], g);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = g[i] * rbf(v[i] * r);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = v[i] * r;
    }
    orow[c] = pack8(v);
  }
}

// The unit-weight norm into fp32 rows: out = x r, unrounded. One block per row.
__global__ void rmsnorm_f32_kernel(const bf16_t* x, float* out, int dim, float eps) {
  __shared__ float scratch[32];
  launch_dependents();
  const int dim8 = dim / 8;
  const int4* xr = reinterpret_cast<const int4*>(x) + size_t(blockIdx.x) * dim8;
  const float r = block_row_rms(x + size_t(blockIdx.x) * dim, dim, eps, scratch);
  float4* orow = reinterpret_cast<float4*>(out + size_t(blockIdx.x) * dim);
  for (int c = threadIdx.x; c < dim8; c += blockDim.x) {
    float v[8];
    unpack8(xr[c], v);
    orow[2 * c] = make_float4(v[0] * r, v[1] * r, v[2] * r, v[3] * r);
    orow[2 * c + 1] = make_float4(v[4] * r, v[5] * r, v[6] * r, v[7] * r);
  }
}

// Grid-stride over 8-element chunks of a [rows, K] weight.
__global__ void fold_kernel(bf16_t* W, size_t chunks, int K8, const bf16_t* w) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < chunks;
       i += size_t(gridDim.x) * blockDim.x) {
    int4* p = reinterpret_cast<int4*>(W) + i;
    float v[8], g[8];
    unpack8(*p, v);
    unpack8(reinterpret_cast<const int4*>(w)[i % K8], g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] *= g[j];
    *p = pack8(v);
  }
}

}  // namespace

void rmsnorm(const bf16_t* x, const bf16_t* w, bf16_t* out, int T, int dim, float eps,
             cudaStream_t stream) {
  if (T <= 0) return;
  const int dim8 = dim / 8;
  const int threads = dim8 >= 512 ? 512 : ((dim8 + 31) / 32) * 32;
  rmsnorm_kernel<<<T, threads, 0, stream>>>(x, w, out, dim, eps);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void rmsnorm_f32(const bf16_t* x, float* out, int T, int dim, float eps, cudaStream_t stream) {
  if (T <= 0) return;
  const int dim8 = dim / 8;
  const int threads = dim8 >= 512 ? 512 : ((dim8 + 31) / 32) * 32;
  rmsnorm_f32_kernel<<<T, threads, 0, stream>>>(x, out, dim, eps);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void fold_norm_weight(bf16_t* W, size_t rows, int K, const bf16_t* w, cudaStream_t stream) {
  if (K % 8 || reinterpret_cast<uintptr_t>(W) % 16 || reinterpret_cast<uintptr_t>(w) % 16)
    cuda_fail("fold_norm_weight", "K % 8 and 16-byte alignment required", __FILE__, __LINE__);
  const size_t chunks = rows * size_t(K / 8);
  if (chunks == 0) return;
  const unsigned blocks = unsigned(std::min<size_t>((chunks + 255) / 256, 4096));
  fold_kernel<<<blocks, 256, 0, stream>>>(W, chunks, K / 8, w);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
