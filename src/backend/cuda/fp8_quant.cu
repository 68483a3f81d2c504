#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/kv_fp8.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBlock = 128;

// One thread block per 128 x 128 weight block: the block's amax, then its codes (the second
// pass reads the block again from L2).
__global__ void __launch_bounds__(256)
    quantize_weight_kernel(const bf16_t* W, int64_t N, int K, uint8_t* q, float* s, int lds) {
  const int kb = blockIdx.x;
  const int64_t nb = blockIdx.y;
  const int64_t n0 = nb * kBlock;
  const int k0 = kb * kBlock;
  const int rows = N - n0 < kBlock ? int(N - n0) : kBlock, cols = min(kBlock, K - k0);
  __shared__ float red[8];
  float amax = 0.0f;
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    amax = fmaxf(amax, fabsf(__bfloat162float(W[(n0 + r) * K + k0 + c])));
  }
  amax = warp_max(amax);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.0f;
    v = warp_max(v);
    if (threadIdx.x == 0) red[0] = v;
  }
  __syncthreads();
  amax = red[0];
  const float inv = kv_fp8_inv_scale(amax);
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    const int64_t at = (n0 + r) * K + k0 + c;
    q[at] = kv_fp8_encode(__bfloat162float(W[at]), inv);
  }
  if (threadIdx.x == 0) s[nb * lds + kb] = kv_fp8_scale(amax);
}

constexpr int kRowThreads = 256;

// One thread block per row. With a norm, the row's mean square first (fp32, as HF computes
// it); then each warp takes 128-wide groups, 4 values a lane: amax, codes, scale.
__global__ void __launch_bounds__(kRowThreads)
    quantize_rows_kernel(const bf16_t* X, int ldx, int T, int K, uint8_t* q, float* s,
                         const bf16_t* norm_w, float eps, int rows) {
  const int t = blockIdx.x;
  if (t >= T) {  // a padding row: zero codes, zero scales
    for (int i = threadIdx.x * 4; i < K; i += kRowThreads * 4)
      *reinterpret_cast<uint32_t*>(q + size_t(t) * K + i) = 0u;
    for (int g = threadIdx.x; g < (K + kBlock - 1) / kBlock; g += kRowThreads)
      s[size_t(g) * rows + t] = 0.0f;
    return;
  }
  const bf16_t* x = X + size_t(t) * ldx;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float r = 1.0f;
  if (norm_w) {
    __shared__ float red[kRowThreads / 32];
    float ss = 0.0f;
    for (int i = threadIdx.x * 4; i < K; i += kRowThreads * 4) {
      const uint2 v = *reinterpret_cast<const uint2*>(x + i);
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
      ss += a.x * a.x + a.y * a.y + b.x * b.x + b.y * b.y;
    }
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < kRowThreads / 32; ++w) tot += red[w];
    r = rsqrtf(tot / float(K) + eps);
  }
  const int groups = (K + kBlock - 1) / kBlock;
  for (int g = warp; g < groups; g += kRowThreads / 32) {
    const int i = g * kBlock + lane * 4;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool in = i < K;  // K % 4 == 0: a lane's 4 values are all in or all out
    if (in) {
      const uint2 raw = *reinterpret_cast<const uint2*>(x + i);
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
      v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
      if (norm_w) {
        const uint2 wr = *reinterpret_cast<const uint2*>(norm_w + i);
        const float2 wa = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wr.x));
        const float2 wb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wr.y));
        const float w[4] = {wa.x, wa.y, wb.x, wb.y};
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = rbf(w[j] * rbf(v[j] * r));
      }
    }
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
    amax = warp_max(amax);
    const float inv = kv_fp8_inv_scale(amax);
    if (in) {
      uint32_t packed = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) packed |= uint32_t(kv_fp8_encode(v[j], inv)) << (8 * j);
      *reinterpret_cast<uint32_t*>(q + size_t(t) * K + i) = packed;
    }
    if (lane == 0) s[size_t(g) * rows + t] = kv_fp8_scale(amax);
  }
}

}  // namespace

void quantize_weight_fp8(const bf16_t* W, int64_t N, int K, uint8_t* q, float* s, int lds,
                         cudaStream_t stream) {
  if (N <= 0 || K <= 0) return;
  const int kbs = (K + kBlock - 1) / kBlock;
  const int64_t nbs = (N + kBlock - 1) / kBlock;
  if (lds < kbs || nbs > 65535)
    cuda_fail("quantize_weight_fp8", "scale stride below ceil(K/128) or N too large", __FILE__,
              __LINE__);
  quantize_weight_kernel<<<dim3(kbs, unsigned(nbs)), 256, 0, stream>>>(W, N, K, q, s, lds);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void quantize_rows_fp8(const bf16_t* X, int ldx, int T, int K, uint8_t* q, float* s,
                       cudaStream_t stream, const bf16_t* norm_w, float eps, int rows) {
  if (rows == 0) rows = T;
  if (T <= 0) return;
  if (K % 4 || ldx % 4 || rows < T)
    cuda_fail("quantize_rows_fp8", "K and ldx must be multiples of 4, rows >= T", __FILE__,
              __LINE__);
  quantize_rows_kernel<<<rows, kRowThreads, 0, stream>>>(X, ldx, T, K, q, s, norm_w, eps, rows);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
