#include <algorithm>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/qk_norm_rope.cuh"

namespace tandem::cuda {
namespace {

// One head of one row, by one warp: x (hd values of the qkv row) scaled to bf16(x r) first
// (r = 1: unchanged); q/k heads (w given) normed and rotated in place, v heads (w null) only
// scaled; kdst (null: none) gets the result too. Lane l owns the rotation pairs (i, i + hd/2)
// for i = l, l + 32, ... (at most 4 pairs: hd <= 256).
__device__ __forceinline__ void head_norm_rope(bf16_t* x, bf16_t* kdst, const bf16_t* w, int hd,
                                               float eps, float p, const float* inv_freq,
                                               float mscale, float r, int lane) {
  if (!w) {
    for (int i = lane; i < hd; i += 32) {
      const bf16_t v = __float2bfloat16(__bfloat162float(x[i]) * r);
      x[i] = v;
      if (kdst) kdst[i] = v;
    }
    return;
  }
  const int half = hd / 2;
  float a[4], b[4];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    a[j] = b[j] = 0.0f;
    if (i < half) {
      a[j] = rbf(__bfloat162float(x[i]) * r);
      b[j] = rbf(__bfloat162float(x[i + half]) * r);
    }
    ss += a[j] * a[j] + b[j] * b[j];
  }
  const float rn = rsqrtf(warp_sum(ss) / float(hd) + eps);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    if (i >= half) continue;
    const float ya = rbf(__bfloat162float(w[i]) * rbf(a[j] * rn));
    const float yb = rbf(__bfloat162float(w[i + half]) * rbf(b[j] * rn));
    float sn, cs;
    sincosf(p * inv_freq[i], &sn, &cs);
    const float c = rbf(cs * mscale), s = rbf(sn * mscale);
    const bf16_t lo = __float2bfloat16(rbf(ya * c) - rbf(yb * s));
    const bf16_t hi = __float2bfloat16(rbf(yb * c) + rbf(ya * s));
    x[i] = lo;
    x[i + half] = hi;
    if (kdst) {
      kdst[i] = lo;
      kdst[i + half] = hi;
    }
  }
}

// Where head h of row t goes in the cache (null: no cache, a negative slot, or a q head).
__device__ __forceinline__ bf16_t* cache_dst(const KvDest& kv, int t, int h, int Hq, int Hkv,
                                             int hd) {
  const int64_t slot = kv.k_cache ? kv.slots[t] : -1;
  if (h < Hq || slot < 0) return nullptr;
  return (h < Hq + Hkv ? kv.k_cache : kv.v_cache) + (size_t(slot) * Hkv + (h - Hq) % Hkv) * hd;
}

// One block per row t. With xin (the qkv product read the unnormalised residual row), the
// row's input-norm factor r = rsqrt(mean(xin_t^2) + in_eps) first, else r = 1; then warp w
// takes heads w, w + warps, ... (the v heads only where they are scaled or cached).
__global__ void qk_norm_rope_kernel(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w,
                                    const bf16_t* k_w, const float* inv_freq, float mscale, int Hq,
                                    int Hkv, int hd, float eps, KvDest kv, const bf16_t* xin,
                                    int dim, float in_eps) {
  __shared__ float scratch[32];
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int t = blockIdx.x;
  const float r = xin ? block_row_rms(xin + size_t(t) * dim, dim, in_eps, scratch) : 1.0f;
  const int row = Hq + 2 * Hkv, warps = blockDim.x >> 5;
  const int heads = xin || kv.k_cache ? row : Hq + Hkv;
  const float p = float(pos[t]);
  for (int h = threadIdx.x >> 5; h < heads; h += warps) {
    bf16_t* x = qkv + size_t(t) * row * hd + size_t(h) * hd;
    const bf16_t* w = h < Hq ? q_w : h < Hq + Hkv ? k_w : nullptr;
    head_norm_rope(x, cache_dst(kv, t, h, Hq, Hkv, hd), w, hd, eps, p, inv_freq, mscale, r,
                   threadIdx.x & 31);
  }
}

}  // namespace

void qk_norm_rope(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w, const bf16_t* k_w,
                  RopeArgs rope, int T, int Hq, int Hkv, int hd, float eps, cudaStream_t stream,
                  KvDest kv, RowNormInput in) {
  if (T <= 0) return;
  if (in.x && (in.dim % 8 || reinterpret_cast<uintptr_t>(in.x) % 16))
    cuda_fail("qk_norm_rope", "input rows need dim % 8 == 0 and 16-byte alignment", __FILE__,
              __LINE__);
  const int warps = std::min(Hq + 2 * Hkv, 32);
  qk_norm_rope_kernel<<<T, 32 * warps, 0, stream>>>(qkv, pos, q_w, k_w, rope.inv_freq,
                                                    rope.mscale, Hq, Hkv, hd, eps, kv, in.x,
                                                    in.dim, in.eps);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
