#pragma once
// Copies each new token's K and V (from the fused qkv rows) into the paged cache.
// Cache layout, one layer: [num_blocks * block_size (= slots), Hkv, hd] for K and for V.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// qkv: [T, (Hq + 2 Hkv) * hd]; slots: [T], a negative slot skips the token (padding rows of
// a captured decode graph). hd % 8 == 0.
void kv_write(const __nv_bfloat16* qkv, const int64_t* slots, __nv_bfloat16* k_cache,
              __nv_bfloat16* v_cache, int T, int Hq, int Hkv, int hd, cudaStream_t stream);

}  // namespace tandem::cuda
