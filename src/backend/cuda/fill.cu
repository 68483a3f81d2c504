#include <algorithm>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/fill.cuh"

namespace tandem::cuda {
namespace {

__device__ __forceinline__ uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(bf16_t* x, size_t n, uint64_t seed, float mean, float std) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t h = splitmix(seed ^ splitmix(i));
    const float u = float(h >> 40) * (1.0f / 16777216.0f);          // [0, 1)
    x[i] = __float2bfloat16(mean + std * 3.4641016f * (u - 0.5f));  // sqrt(12) (u - 1/2)
  }
}

__global__ void fill_constant_kernel(bf16_t* x, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(v);
}

__global__ void bf16_to_f32_kernel(const bf16_t* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}

int grid_for(size_t n) {
  return int(std::min<size_t>((n + 255) / 256, 132 * 32));
}

}  // namespace

void fill_random(bf16_t* x, size_t n, uint64_t seed, float mean, float std, cudaStream_t stream) {
  if (n == 0) return;
  fill_random_kernel<<<grid_for(n), 256, 0, stream>>>(x, n, seed, mean, std);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void fill_constant(bf16_t* x, size_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_constant_kernel<<<grid_for(n), 256, 0, stream>>>(x, n, value);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const bf16_t* x, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  bf16_to_f32_kernel<<<grid_for(n), 256, 0, stream>>>(x, y, n);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
