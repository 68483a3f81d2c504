#pragma once
// Qwen3's per-head q/k RMSNorm followed by rotary embedding (NeoX half split), in place on
// the fused qkv projection output:
//   qkv row t: [q heads (Hq x hd) | k heads (Hkv x hd) | v heads (Hkv x hd)]
//   for each q and k head: y = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))
//     f_i = pos * inv_freq[i] (fp32), c = bf16(cos f_i * mscale), s = bf16(sin f_i * mscale)
//     y'[i] = y[i] c - y[i + hd/2] s,  y'[i + hd/2] = y[i + hd/2] c + y[i] s   (i < hd/2)
// inv_freq holds plain RoPE or YaRN frequencies (computed on the host); mscale is YaRN's
// attention factor (1 for plain RoPE). v heads are untouched (but for the row scale below).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

struct RopeArgs {
  const float* inv_freq;  // [hd / 2] fp32, device
  float mscale = 1.0f;
};

// Optional fused KV write (what kv_write.cuh does, without another pass): the finished k
// heads and the v heads of row t go to slot slots[t] of the paged cache ([slots, Hkv, hd]);
// a negative slot skips the row. With k_scale set the cache is FP8: e4m3 codes in
// k_cache/v_cache and one fp32 scale per (slot, head) in k_scale/v_scale ([slots, Hkv]),
// by the rule of core/fp8.h applied to the finished bf16 values.
struct KvDest {
  const int64_t* slots = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;
};

// Optional: the qkv product was computed from the unnormalised residual rows x (the layer's
// input norm weight folded into its weight, rmsnorm.cuh): every value of row t, v heads
// included, is first scaled to bf16(v * rsqrt(mean(x_t^2) + eps)), so the input norm needs
// no kernel of its own.
struct RowNormInput {
  const __nv_bfloat16* x = nullptr;  // [T, dim], 16-byte aligned rows
  int dim = 0;                       // % 8 == 0
  float eps = 0.0f;
};
// qkv: [T, (Hq + 2 Hkv) * hd]; pos: [T]; q_w, k_w: [hd]; hd even and <= 256.
void qk_norm_rope(__nv_bfloat16* qkv, const int32_t* pos, const __nv_bfloat16* q_w,
                  const __nv_bfloat16* k_w, RopeArgs rope, int T, int Hq, int Hkv, int hd,
                  float eps, cudaStream_t stream, KvDest kv = {}, RowNormInput in = {});

}  // namespace tandem::cuda
