#include <algorithm>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/qk_norm_rope.cuh"

namespace tandem::cuda {
namespace {

// One head's finished values to the FP8 cache: amax over the warp's values (this lane's
// are in v, at positions pos), then codes and, from lane 0, the scale (rule of core/fp8.h).
template <int N>
__device__ __forceinline__ void store_fp8(const float (&v)[N], const int (&pos)[N], int n,
                                          uint8_t* q, float* scale, int lane) {
  float am = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j < n) am = fmaxf(am, fabsf(v[j]));
  am = warp_max(am);
  const float inv = kv_fp8_inv_scale(am);
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j < n) q[pos[j]] = kv_fp8_encode(v[j], inv);
  if (lane == 0) *scale = kv_fp8_scale(am);
}

// One head of one row, by one warp: x (hd values of the qkv row) scaled to bf16(x r) first
// (r = 1: unchanged); q/k heads (w given) normed and rotated in place, v heads (w null) only
// scaled; dst (null: none) gets the result too: bf16 values, or with kFp8 e4m3 codes and
// the scale *sdst, quantised from the bf16 values written back to x. Lane l owns the rotation
// pairs (i, i + hd/2) for i = l, l + 32, ... (at most 4 pairs: hd <= 256).
template <bool kFp8>
__device__ __forceinline__ void head_norm_rope(bf16_t* x, void* dst, float* sdst, const bf16_t* w,
                                               int hd, float eps, float p, const float* inv_freq,
                                               float mscale, float r, int lane) {
  if (!w) {
    if constexpr (kFp8) {
      if (dst) {  // the values stay in registers for the warp's amax
        float v[8];
        int pos[8], n = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int i = lane + 32 * j;
          pos[j] = i;
          v[j] = 0.0f;
          if (i < hd) {
            const bf16_t b = __float2bfloat16(__bfloat162float(x[i]) * r);
            x[i] = b;
            v[j] = __bfloat162float(b);
            n = j + 1;
          }
        }
        store_fp8(v, pos, n, static_cast<uint8_t*>(dst), sdst, lane);
        return;
      }
    }
    bf16_t* kdst = kFp8 ? nullptr : static_cast<bf16_t*>(dst);
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
  float v[8];  // kFp8: this lane's finished values, at positions pos
  int pos[8], n = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    pos[2 * j] = i;
    pos[2 * j + 1] = i + half;
    v[2 * j] = v[2 * j + 1] = 0.0f;
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
    if constexpr (kFp8) {
      v[2 * j] = __bfloat162float(lo);
      v[2 * j + 1] = __bfloat162float(hi);
      n = 2 * j + 2;
    } else if (dst) {
      static_cast<bf16_t*>(dst)[i] = lo;
      static_cast<bf16_t*>(dst)[i + half] = hi;
    }
  }
  if constexpr (kFp8)
    if (dst) store_fp8(v, pos, n, static_cast<uint8_t*>(dst), sdst, lane);
}

// The cache row (slot * Hkv + KV head) that head h of row t goes to, or -1: no cache, a
// negative slot, or a q head.
__device__ __forceinline__ int64_t cache_row(const KvDest& kv, int t, int h, int Hq, int Hkv) {
  const int64_t slot = kv.k_cache ? kv.slots[t] : -1;
  if (h < Hq || slot < 0) return -1;
  return slot * Hkv + (h - Hq) % Hkv;
}

// One block per row t. With xin (the qkv product read the unnormalised residual row), the
// row's input-norm factor r = rsqrt(mean(xin_t^2) + in_eps) first, else r = 1; then warp w
// takes heads w, w + warps, ... (the v heads only where they are scaled or cached). kFp8: the
// cache (if any) is FP8; a template parameter so the bf16 path carries none of its code.
template <bool kFp8>
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
    const int64_t cr = cache_row(kv, t, h, Hq, Hkv);
    const bool is_k = h < Hq + Hkv;
    void* dst = nullptr;
    float* sdst = nullptr;
    if (cr >= 0) {
      if constexpr (kFp8) {
        dst = static_cast<uint8_t*>(is_k ? kv.k_cache : kv.v_cache) + cr * hd;
        sdst = (is_k ? kv.k_scale : kv.v_scale) + cr;
      } else {
        dst = static_cast<bf16_t*>(is_k ? kv.k_cache : kv.v_cache) + cr * hd;
      }
    }
    head_norm_rope<kFp8>(x, dst, sdst, w, hd, eps, p, inv_freq, mscale, r, threadIdx.x & 31);
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
  if (kv.k_cache && kv.k_scale)
    qk_norm_rope_kernel<true><<<T, 32 * warps, 0, stream>>>(
        qkv, pos, q_w, k_w, rope.inv_freq, rope.mscale, Hq, Hkv, hd, eps, kv, in.x, in.dim, in.eps);
  else
    qk_norm_rope_kernel<false><<<T, 32 * warps, 0, stream>>>(
        qkv, pos, q_w, k_w, rope.inv_freq, rope.mscale, Hq, Hkv, hd, eps, kv, in.x, in.dim, in.eps);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
