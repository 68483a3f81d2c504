#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launch.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
// 16-byte W loads in flight per lane and row. Batch-1 decode on the H200 (tok/s, two calls):
// 2 loads 130.9 / 129.8, 1 load 127.4, 3 loads 128.6, 4 loads 127.6, 6 loads 121.7; blocks
// of 128 / 512 / 1024 threads 128.0 / 128.8 / 123.4; __ldg instead of evict-first
// streaming loads 121.7 (4 loads).
constexpr int kUnroll = 2;

// SWIGLU: W holds gate rows [0, N) then up rows [N, 2N); the warp for column n reads rows n
// and N + n and writes bf16(bf16(silu(g)) * u) with g, u rounded to bf16 as the unfused
// layers would store them (the fused gate/up output never goes to memory).
// XT: X in bf16, or in fp32 (a norm's output kept unrounded: no unpacking in the loop).
template <int T, bool SWIGLU, class XT = bf16_t>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const XT* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int N, int K,
                bool accumulate) {
  constexpr int R = SWIGLU ? 2 : 1;  // weight rows per warp
  launch_dependents();               // a following PDL kernel (the next GEMV) may launch and wait
  const int n = (blockIdx.x * kThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  const int4* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    w[r] = reinterpret_cast<const int4*>(W + (size_t(n) + size_t(r) * N) * K);
  const int K8 = K / 8;
  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  int4 wv[R][kUnroll];
  auto load_w = [&](int c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[r][u] = c < K8 ? __ldcs(w[r] + c) : make_int4(0, 0, 0, 0);  // streamed: read once
    }
  };
  // Wait for the previous kernel's output X (programmatic dependent launch: this kernel may
  // start early). Issuing the first weight loads before the wait measured slower on the H200
  // (121.6 vs 126.5 tok/s at batch-1 decode), as did 8 loads in flight per lane (113.1).
  grid_dependency_wait();
  for (int c0 = lane; c0 < K8; c0 += 32 * kUnroll) {
    load_w(c0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c >= K8) break;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(wv[r][u], wf[r]);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float xf[8];
        if constexpr (sizeof(XT) == 4) {
          const float4* xr = reinterpret_cast<const float4*>(X + size_t(t) * ldx) + 2 * c;
          const float4 a = __ldg(xr), b = __ldg(xr + 1);
          xf[0] = a.x, xf[1] = a.y, xf[2] = a.z, xf[3] = a.w;
          xf[4] = b.x, xf[5] = b.y, xf[6] = b.z, xf[7] = b.w;
        } else {
          unpack8(__ldg(reinterpret_cast<const int4*>(X + size_t(t) * ldx) + c), xf);
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] += wf[r][i] * xf[i];
      }
    }
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float v = warp_sum(acc[0][t]);
    if constexpr (SWIGLU) {
      v = swiglu_bf16(v, warp_sum(acc[R - 1][t]));
    }
    if (lane == 0) {
      bf16_t* y = Y + size_t(t) * ldy + n;
      *y = __float2bfloat16(accumulate ? v + __bfloat162float(*y) : v);
    }
  }
}

template <int T>
void launch_f32x(const float* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int N, int K,
                 cudaStream_t stream) {
  const dim3 grid((N * 32 + kThreads - 1) / kThreads), block(kThreads);
  launch_pdl(gemv_kernel<T, true, float>, grid, block, 0, stream, X, ldx, W, Y, ldy, N, K, false);
}

template <int T>
void launch(const bf16_t* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int N, int K,
            bool swiglu, bool accumulate, cudaStream_t stream) {
  const dim3 grid((N * 32 + kThreads - 1) / kThreads), block(kThreads);
  if (swiglu)
    launch_pdl(gemv_kernel<T, true>, grid, block, 0, stream, X, ldx, W, Y, ldy, N, K, accumulate);
  else
    launch_pdl(gemv_kernel<T, false>, grid, block, 0, stream, X, ldx, W, Y, ldy, N, K, accumulate);
}

// launch<T> for the T in [1, kGemvMaxTokens] given at run time (Is = T - 1).
template <int... Is>
void launch_rows(std::integer_sequence<int, Is...>, int T, const bf16_t* X, int ldx,
                 const bf16_t* W, bf16_t* Y, int ldy, int N, int K, bool swiglu, bool accumulate,
                 cudaStream_t stream) {
  ((T == Is + 1 && (launch<Is + 1>(X, ldx, W, Y, ldy, N, K, swiglu, accumulate, stream), true)) ||
   ...);
}

}  // namespace

bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TANDEM_PDL");
    if (e && std::string(e) == "0") return false;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
      return false;
    return major >= 9;
  }();
  return on;
}

void gemv(const bf16_t* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int T, int N, int K,
          cudaStream_t stream, bool swiglu, bool accumulate) {
  if (T < 1 || T > kGemvMaxTokens) cuda_fail("gemv", "T must be in [1, 8]", __FILE__, __LINE__);
  if (swiglu && accumulate) cuda_fail("gemv", "SwiGLU does not accumulate", __FILE__, __LINE__);
  launch_rows(std::make_integer_sequence<int, kGemvMaxTokens>{}, T, X, ldx, W, Y, ldy, N, K, swiglu,
              accumulate, stream);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void gemv_swiglu_f32x(const float* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int T, int N,
                      int K, cudaStream_t stream) {
  if (T < 1 || T > 2 || ldx % 4 || reinterpret_cast<uintptr_t>(X) % 16)
    cuda_fail("gemv_swiglu_f32x", "T must be 1 or 2, X rows 16-byte aligned", __FILE__, __LINE__);
  if (T == 1)
    launch_f32x<1>(X, ldx, W, Y, ldy, N, K, stream);
  else
    launch_f32x<2>(X, ldx, W, Y, ldy, N, K, stream);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
