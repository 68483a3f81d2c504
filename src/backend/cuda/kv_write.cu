#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/kv_write.cuh"

namespace tandem::cuda {
namespace {

__global__ void kv_write_kernel(const bf16_t* qkv, const int64_t* slots, bf16_t* kc, bf16_t* vc,
                                int Hq, int Hkv, int hd) {
  const int t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  const int n8 = Hkv * hd / 8;  // 16-byte words of K (and of V) per token
  const int4* row = reinterpret_cast<const int4*>(qkv + size_t(t) * (Hq + 2 * Hkv) * hd);
  const int4* k = row + Hq * hd / 8;
  const int4* v = k + n8;
  int4* kd = reinterpret_cast<int4*>(kc) + slot * n8;
  int4* vd = reinterpret_cast<int4*>(vc) + slot * n8;
  for (int c = threadIdx.x; c < n8; c += blockDim.x) {
    kd[c] = k[c];
    vd[c] = v[c];
  }
}

// FP8 cache: each of the row's 2 Hkv vectors (k heads then v heads, contiguous in the row)
// is quantised by a group of gw lanes (a power of two >= hd / 8, so a group never straddles
// a warp); lane c of a group holds the 16-byte word c of the vector. The group's amax comes
// from a butterfly over the group, then each lane stores its 8 codes and lane c = 0 the scale.
__global__ void kv_write_fp8_kernel(const bf16_t* qkv, const int64_t* slots, uint8_t* kc,
                                    uint8_t* vc, float* ks, float* vs, int Hq, int Hkv, int hd,
                                    int gw) {
  const int t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  const int nvec = 2 * Hkv, gpw = 32 / gw, words = hd / 8;
  const int lane = threadIdx.x & 31, c = lane % gw;
  const int step = (blockDim.x >> 5) * gpw;
  const bf16_t* kv = qkv + (size_t(t) * (Hq + 2 * Hkv) + Hq) * hd;
  // Loop bounds are uniform over the warp: every lane takes part in each shuffle.
  for (int v0 = (threadIdx.x >> 5) * gpw; v0 < nvec; v0 += step) {
    const int vec = v0 + lane / gw;
    const bool on = vec < nvec && c < words;
    float f[8] = {};
    float am = 0.0f;
    if (on) {
      unpack8(reinterpret_cast<const int4*>(kv + size_t(vec) * hd)[c], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) am = fmaxf(am, fabsf(f[i]));
    }
    for (int o = gw >> 1; o > 0; o >>= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    if (!on) continue;
    const float inv = kv_fp8_inv_scale(am);
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i / 4] |= uint32_t(kv_fp8_encode(f[i], inv)) << (8 * (i % 4));
    const bool is_k = vec < Hkv;
    const int64_t r = slot * Hkv + (is_k ? vec : vec - Hkv);  // cache row
    reinterpret_cast<uint2*>((is_k ? kc : vc) + r * hd)[c] = make_uint2(w[0], w[1]);
    if (c == 0) (is_k ? ks : vs)[r] = kv_fp8_scale(am);
  }
}

}  // namespace

void kv_write(const bf16_t* qkv, const int64_t* slots, void* k_cache, void* v_cache, int T, int Hq,
              int Hkv, int hd, cudaStream_t stream, float* k_scale, float* v_scale) {
  if (T <= 0) return;
  if (k_scale) {
    if (hd % 8 || hd > 256)
      cuda_fail("kv_write", "the FP8 cache needs hd % 8 == 0 and hd <= 256", __FILE__, __LINE__);
    int gw = 1;
    while (gw < hd / 8) gw *= 2;
    const int lanes = 2 * Hkv * gw;
    const int threads = lanes >= 256 ? 256 : ((lanes + 31) / 32) * 32;
    kv_write_fp8_kernel<<<T, threads, 0, stream>>>(qkv, slots, static_cast<uint8_t*>(k_cache),
                                                   static_cast<uint8_t*>(v_cache), k_scale, v_scale,
                                                   Hq, Hkv, hd, gw);
    TANDEM_CUDA_CHECK_LAUNCH();
    return;
  }
  const int n8 = Hkv * hd / 8;
  const int threads = n8 >= 128 ? 128 : ((n8 + 31) / 32) * 32;
  kv_write_kernel<<<T, threads, 0, stream>>>(qkv, slots, static_cast<bf16_t*>(k_cache),
                                             static_cast<bf16_t*>(v_cache), Hq, Hkv, hd);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
