#include "backend/cuda/argmax.cuh"
#include "backend/cuda/check.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 512;

// (value, index) with "larger value, then smaller index" as the order.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// One block per row: each thread scans a strided slice, then a warp-shuffle and shared-memory
// reduction picks the winner.
__global__ void argmax_kernel(const float* logits, int vocab, int32_t* out) {
  const float* row = logits + size_t(blockIdx.x) * vocab;
  float best = -INFINITY;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (better(v, i, best, bi)) best = v, bi = i;  // NaN compares false: never taken
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, best, bi)) best = ov, bi = oi;
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = best, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(sv[w], si[w], best, bi)) best = sv[w], bi = si[w];
    out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;  // an all-NaN row yields id 0
  }
}

}  // namespace

void argmax_rows(const float* logits, int rows, int vocab, int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return;
  argmax_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
