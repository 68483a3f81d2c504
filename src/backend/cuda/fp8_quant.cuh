#pragma once
// FP8 quantization on the GPU for FP8 weights (gemm_fp8.h):
// - weights: [N, K] bf16 -> e4m3 codes in 128 x 128 blocks with one fp32 scale per block,
//   the rule of core/fp8.h (fp8_block_quantize), bit for bit;
// - activations: each row's 128-wide groups -> e4m3 codes and one fp32 scale per group, the
//   KV cache's rule (kv_fp8_quantize on 128 values), scales laid out [ceil(K / 128)][T] as
//   the block-scaled GEMM reads them. Optionally the row is RMS-normalised first (HF's
//   RMSNorm: bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))), so a norm and the quantization of
//   its output are one pass.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// W: [N, K] bf16 row-major; q: [N, K] codes; s: [ceil(N / 128)][lds] (lds >= ceil(K / 128);
// entries past ceil(K / 128) are left as they are).
void quantize_weight_fp8(const __nv_bfloat16* W, int64_t N, int K, uint8_t* q, float* s, int lds,
                         cudaStream_t stream);

// X: [T, K] bf16 rows with stride ldx (% 4 == 0); q: [R, K] codes (stride K); s: [ceil(K /
// 128)][R], R = rows (>= T; 0: T): rows T..R-1 get zero codes and scales (padding for a GEMM
// that takes only some row counts). K % 4 == 0. norm_w: [K] or null (no norm).
void quantize_rows_fp8(const __nv_bfloat16* X, int ldx, int T, int K, uint8_t* q, float* s,
                       cudaStream_t stream, const __nv_bfloat16* norm_w = nullptr, float eps = 0.0f,
                       int rows = 0);

}  // namespace tandem::cuda
