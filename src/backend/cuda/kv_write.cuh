#pragma once
// Copies each new token's K and V (from the fused qkv rows) into the paged cache.
// Cache layout, one layer: [num_blocks * block_size (= slots), Hkv, hd] for K and for V.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// qkv: [T, (Hq + 2 Hkv) * hd]; slots: [T], a negative slot skips the token (padding rows of
// a captured decode graph). hd % 8 == 0. With k_scale set the cache is FP8 (e4m3 codes in
// k_cache/v_cache, fp32 scales [slots, Hkv] in k_scale/v_scale; the rule of core/fp8.h).
void kv_write(const __nv_bfloat16* qkv, const int64_t* slots, void* k_cache, void* v_cache, int T,
              int Hq, int Hkv, int hd, cudaStream_t stream, float* k_scale = nullptr,
              float* v_scale = nullptr);

}  // namespace tandem::cuda
