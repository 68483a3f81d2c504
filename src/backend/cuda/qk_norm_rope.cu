#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/qk_norm_rope.cuh"

namespace tandem::cuda {
namespace {

// One warp per (token, head) among the Hq + Hkv normalised heads. Lane l owns the rotation
// pairs (i, i + hd/2) for i = l, l + 32, ... (at most 4 pairs: hd <= 256).
// With a KV destination the grid also covers the v heads, which are only copied.
__global__ void qk_norm_rope_kernel(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w,
                                    const bf16_t* k_w, const float* inv_freq, float mscale, int T,
                                    int Hq, int Hkv, int hd, float eps, KvDest kv) {
  const int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int lane = threadIdx.x & 31;
  const int heads = Hq + (kv.k_cache ? 2 : 1) * Hkv;
  if (gw >= T * heads) return;
  const int t = gw / heads, h = gw % heads;
  bf16_t* x = qkv + size_t(t) * (Hq + 2 * Hkv) * hd + size_t(h) * hd;
  const int64_t slot = kv.k_cache ? kv.slots[t] : -1;
  bf16_t* kdst = h >= Hq && slot >= 0 ? (h < Hq + Hkv ? kv.k_cache : kv.v_cache) +
                                            (size_t(slot) * Hkv + (h - Hq) % Hkv) * hd
                                      : nullptr;
  if (h >= Hq + Hkv) {  // v head: copy only
    if (kdst)
      for (int i = lane; i < hd; i += 32) kdst[i] = x[i];
    return;
  }
  const bf16_t* w = h < Hq ? q_w : k_w;
  const int half = hd / 2;
  float a[4], b[4];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    a[j] = b[j] = 0.0f;
    if (i < half) {
      a[j] = __bfloat162float(x[i]);
      b[j] = __bfloat162float(x[i + half]);
    }
    ss += a[j] * a[j] + b[j] * b[j];
  }
  const float r = rsqrtf(warp_sum(ss) / float(hd) + eps);
  const float p = float(pos[t]);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = lane + 32 * j;
    if (i >= half) continue;
    const float ya = rbf(__bfloat162float(w[i]) * rbf(a[j] * r));
    const float yb = rbf(__bfloat162float(w[i + half]) * rbf(b[j] * r));
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

}  // namespace

void qk_norm_rope(bf16_t* qkv, const int32_t* pos, const bf16_t* q_w, const bf16_t* k_w,
                  RopeArgs rope, int T, int Hq, int Hkv, int hd, float eps, cudaStream_t stream,
                  KvDest kv) {
  if (T <= 0) return;
  const long warps = long(T) * (Hq + (kv.k_cache ? 2 : 1) * Hkv);
  const int threads = 128;
  const long blocks = (warps * 32 + threads - 1) / threads;
  qk_norm_rope_kernel<<<unsigned(blocks), threads, 0, stream>>>(
      qkv, pos, q_w, k_w, rope.inv_freq, rope.mscale, T, Hq, Hkv, hd, eps, kv);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
