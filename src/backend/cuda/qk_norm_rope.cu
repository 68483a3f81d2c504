#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/launch.cuh"
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

// One head of one row, by one warp. Lane l holds the pairs (i, i + hd/2) for i = l, l + 32,
// ... (at most 4: hd <= 256) in a/b, loaded raw; they are first scaled to bf16(x r) (r = 1:
// unchanged). q/k heads (w given) are then normed and rotated (cs[i]: the row's rounded
// cos/sin), v heads (w null) only scaled. The results go back to x and, where dst is set,
// to the cache: bf16 values, or with kFp8 e4m3 codes and the scale *sdst, quantised from
// the bf16 values written back to x.
template <bool kFp8>
__device__ __forceinline__ void head_norm_rope(bf16_t* x, const float (&a0)[4],
                                               const float (&b0)[4], void* dst, float* sdst,
                                               const bf16_t* w, int hd, float eps, const float2* cs,
                                               float r, int lane) {
  const int half = hd / 2;
  float a[4], b[4];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[j] = rbf(a0[j] * r);
    b[j] = rbf(b0[j] * r);
    ss += a[j] * a[j] + b[j] * b[j];
  }
  float rn = 0.0f;
  if (w) rn = rsqrtf(warp_sum(ss) / float(hd) + eps);
  float v[8];  // kFp8: this lane's finished values, at positions pos
  int pos[8], n = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    pos[2 * j] = i;
    pos[2 * j + 1] = i + half;
    v[2 * j] = v[2 * j + 1] = 0.0f;
    if (i >= half) continue;
    float lo = a[j], hi = b[j];
    if (w) {
      const float ya = rbf(__bfloat162float(w[i]) * rbf(a[j] * rn));
      const float yb = rbf(__bfloat162float(w[i + half]) * rbf(b[j] * rn));
      const float c = cs[i].x, s = cs[i].y;
      lo = rbf(rbf(ya * c) - rbf(yb * s));
      hi = rbf(rbf(yb * c) + rbf(ya * s));
    }
    const bf16_t blo = __float2bfloat16(lo), bhi = __float2bfloat16(hi);
    x[i] = blo;
    x[i + half] = bhi;
    if constexpr (kFp8) {
      v[2 * j] = lo;
      v[2 * j + 1] = hi;
      n = 2 * j + 2;
    } else if (dst) {
      static_cast<bf16_t*>(dst)[i] = blo;
      static_cast<bf16_t*>(dst)[i + half] = bhi;
    }
  }
  if constexpr (kFp8)
    if (dst) store_fp8(v, pos, n, static_cast<uint8_t*>(dst), sdst, lane);
}

// The same for hd / 8 (lh) a power of two: lh lanes take a head, lane j of it the 8 values
// [8j, 8j + 8) in v, loaded raw as one 16-byte word; its rotation partner (i against
// i + hd/2) is lane j ^ lh/2, and the head's sums and amax reduce over its lh lanes. A warp
// may hold heads of different kinds, so every lane runs the shuffles; w null (a v head)
// keeps the scaled values, and lanes past the last head (live false) store nothing.
template <bool kFp8>
__device__ __forceinline__ void head_norm_rope_vec(bf16_t* x, const int4& raw, void* dst,
                                                   float* sdst, const bf16_t* w, int hd, int lh,
                                                   float eps, const float2* cs, float r, int sub,
                                                   bool live) {
  float v[8], y[8], wv[8];
  unpack8(raw, v);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    v[k] = rbf(v[k] * r);
    ss += v[k] * v[k];
  }
  for (int o = lh >> 1; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float rn = rsqrtf(ss / float(hd) + eps);
  if (w)
    unpack8(reinterpret_cast<const int4*>(w)[sub], wv);
  else
#pragma unroll
    for (int k = 0; k < 8; ++k) wv[k] = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = rbf(wv[k] * rbf(v[k] * rn));
  const bool lo = sub < (lh >> 1);
  const int i0 = 8 * sub - (lo ? 0 : hd / 2);  // the pair index of v[0]
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float yp = __shfl_xor_sync(0xffffffffu, y[k], lh >> 1);
    const float2 c = cs[i0 + k];
    const float rot =
        lo ? rbf(rbf(y[k] * c.x) - rbf(yp * c.y)) : rbf(rbf(y[k] * c.x) + rbf(yp * c.y));
    if (w) v[k] = rot;
  }
  const int4 out = pack8(v);
  if (live) reinterpret_cast<int4*>(x)[sub] = out;
  if constexpr (kFp8) {
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) am = fmaxf(am, fabsf(v[k]));
    for (int o = lh >> 1; o > 0; o >>= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    if (dst) {
      const float inv = kv_fp8_inv_scale(am);
      uint32_t q[2] = {0, 0};
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k / 4] |= uint32_t(kv_fp8_encode(v[k], inv)) << (8 * (k % 4));
      reinterpret_cast<uint2*>(dst)[sub] = make_uint2(q[0], q[1]);
      if (sub == 0) *sdst = kv_fp8_scale(am);
    }
  } else if (dst) {
    reinterpret_cast<int4*>(dst)[sub] = out;
  }
}

// The cache row (slot * Hkv + KV head) that head h of row t goes to, or -1: no cache, a
// negative slot, or a q head.
__device__ __forceinline__ int64_t cache_row(const KvDest& kv, int t, int h, int Hq, int Hkv) {
  const int64_t slot = kv.k_cache ? kv.slots[t] : -1;
  if (h < Hq || slot < 0) return -1;
  return slot * Hkv + (h - Hq) % Hkv;
}

// Block (t, g) takes heads g * warps * hpw + ... of row t (hpw heads a warp: one on the
// scalar path, 32 / lh on the vector one; the v heads only where they are scaled or cached).
// Before the grid dependency wait (PDL), the block rounds the row's rotation cos/sin into
// shared memory (pos and inv_freq come from before the step); after it, each warp loads its
// heads raw, and with xin (the qkv product read the unnormalised residual row) the block
// computes the row's input-norm factor r = rsqrt(mean(xin_t^2) + in_eps), else r = 1. kFp8:
// the cache (if any) is FP8; template parameters so each path carries only its own code.
template <bool kFp8, bool kVec>
__global__ void qk_norm_rope_kernel(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w,
                                    const bf16_t* k_w, const float* inv_freq, float mscale, int Hq,
                                    int Hkv, int hd, float eps, KvDest kv, const bf16_t* xin,
                                    int dim, float in_eps) {
  __shared__ float scratch[32];
  __shared__ float2 cs[128];
  const int t = blockIdx.x, lane = threadIdx.x & 31;
  const int half = hd / 2, row = Hq + 2 * Hkv, lh = kVec ? hd / 8 : 32;
  const int heads = xin || kv.k_cache ? row : Hq + Hkv;
  const int h = (blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5)) * (32 / lh) + lane / lh;
  const int sub = lane % lh;
  const float p = float(pos[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float sn, c;
    sincosf(p * inv_freq[i], &sn, &c);
    cs[i] = make_float2(rbf(c * mscale), rbf(sn * mscale));
  }
  grid_dependency_wait();
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  bf16_t* x = qkv + (size_t(t) * row + size_t(h < heads ? h : 0)) * hd;
  int4 raw = make_int4(0, 0, 0, 0);
  float a[4], b[4];
  if constexpr (kVec) {
    if (h < heads) raw = reinterpret_cast<const int4*>(x)[sub];
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = lane + 32 * j;
      a[j] = b[j] = 0.0f;
      if (h < heads && i < half) {
        a[j] = __bfloat162float(x[i]);
        b[j] = __bfloat162float(x[i + half]);
      }
    }
  }
  float r = 1.0f;
  if (xin)
    r = block_row_rms(xin + size_t(t) * dim, dim, in_eps, scratch);
  else
    __syncthreads();  // cs
  // A warp returns whole (its shuffles need every lane); lanes past the last head run along.
  const int h0 = (blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5)) * (32 / lh);
  if (h0 >= heads) return;
  const bool live = h < heads;
  const bf16_t* w = h < Hq ? q_w : h < Hq + Hkv ? k_w : nullptr;
  const int64_t cr = live ? cache_row(kv, t, h, Hq, Hkv) : -1;
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
  if constexpr (kVec)
    head_norm_rope_vec<kFp8>(x, raw, dst, sdst, w, hd, lh, eps, cs, r, sub, live);
  else
    head_norm_rope<kFp8>(x, a, b, dst, sdst, w, hd, eps, cs, r, lane);
}

}  // namespace

void qk_norm_rope(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w, const bf16_t* k_w,
                  RopeArgs rope, int T, int Hq, int Hkv, int hd, float eps, cudaStream_t stream,
                  KvDest kv, RowNormInput in) {
  if (T <= 0) return;
  if (in.x && (in.dim % 8 || reinterpret_cast<uintptr_t>(in.x) % 16))
    cuda_fail("qk_norm_rope", "input rows need dim % 8 == 0 and 16-byte alignment", __FILE__,
              __LINE__);
  // The vector path where hd / 8 is a power of two (every Qwen3 model: hd 128, two heads a
  // warp). Two blocks a row: on the H200 at Qwen3-14B's shape (56 heads with the v heads)
  // 4.1-4.6 us at 64 rows, 8.9 at 256, 230 at 8,192 (1 block: 8.5 and 285 us; 4: 9.0 and
  // 244; 7: 10.0 and 263). TANDEM_QKROPE_PER_ROW overrides it for such sweeps.
  const int heads = in.x || kv.k_cache ? Hq + 2 * Hkv : Hq + Hkv;
  const int lh = hd / 8;
  const bool vec = hd % 8 == 0 && lh >= 2 && lh <= 32 && (lh & (lh - 1)) == 0;
  const int units = vec ? (heads + 32 / lh - 1) / (32 / lh) : heads;  // warps' worth of heads
  static const int forced = [] {
    const char* e = std::getenv("TANDEM_QKROPE_PER_ROW");
    return e ? std::atoi(e) : 0;
  }();
  int per_row = forced > 0 ? forced : 2;
  per_row = std::max(std::min(per_row, units), (units + 31) / 32);  // 1 .. 32 warps a block
  const int warps = (units + per_row - 1) / per_row;
  const dim3 grid{unsigned(T), unsigned(per_row)};
  const bool f8 = kv.k_cache && kv.k_scale;
  auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, dim3(32 * warps), 0, stream, qkv, pos, q_w, k_w, rope.inv_freq,
               rope.mscale, Hq, Hkv, hd, eps, kv, in.x, in.dim, in.eps);
  };
  if (vec)
    f8 ? go(qk_norm_rope_kernel<true, true>) : go(qk_norm_rope_kernel<false, true>);
  else
    f8 ? go(qk_norm_rope_kernel<true, false>) : go(qk_norm_rope_kernel<false, false>);
}

}  // namespace tandem::cuda
