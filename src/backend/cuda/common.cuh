#pragma once
// Device helpers shared by the kernels (device code only: include from .cu files).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

using bf16_t = __nv_bfloat16;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Round through bf16, as a bf16 tensor op in PyTorch would store an intermediate.
__device__ __forceinline__ float rbf(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

// SwiGLU of one gate/up pair as the unfused layers compute it: g and u rounded to bf16 (as
// a [T, 2I] product would store them), silu(g) rounded to bf16, times u.
__device__ __forceinline__ float swiglu_bf16(float g, float u) {
  g = rbf(g);
  return rbf(g / (1.0f + expf(-g))) * rbf(u);
}

// 8 bf16 values in one 16-byte word: the unit of every vectorised load and store here.
__device__ __forceinline__ void unpack8(const int4& v, float f[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ int4 pack8(const float f[8]) {
  int4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// Programmatic dependent launch (sm_90+): a kernel launched with the PDL attribute may start
// while the previous kernel in the stream still runs; it must call grid_dependency_wait()
// before touching anything that kernel writes (or reads). launch_dependents() lets the next
// PDL kernel start early (it still waits for this one's completion). No-ops before sm_90.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Whether kernels that support it are launched with PDL: GPUs of compute capability 9.0+,
// unless the environment sets TANDEM_PDL=0 (for A/B measurements). Host code.
bool pdl_enabled();

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); `scratch` holds
// 32 floats. Every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  v = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// RMSNorm's row factor rsqrt(mean(x^2) + eps) of one bf16 row of `dim` (% 8 == 0) elements,
// 16-byte aligned, computed by the whole block (every thread calls it and gets the factor).
__device__ __forceinline__ float block_row_rms(const bf16_t* row, int dim, float eps,
                                               float* scratch) {
  const int4* r = reinterpret_cast<const int4*>(row);
  float ss = 0.0f;
  for (int c = threadIdx.x; c < dim / 8; c += blockDim.x) {
    float v[8];
    unpack8(r[c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  return rsqrtf(block_sum(ss, scratch) / float(dim) + eps);
}

}  // namespace tandem::cuda
