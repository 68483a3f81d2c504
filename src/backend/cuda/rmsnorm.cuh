#pragma once
// RMSNorm: out = bf16(w * bf16(x * r)), r = rsqrt(mean(x^2) + eps) (fp32 statistics, as
// HF computes it). The CUDA runner folds each decoder layer's norm weights into the product
// that follows (fold_norm_weight), so inside the layers it normalises with w = null (unit
// weight), or inside that product (qk_norm_rope's and the skinny GEMM's row scale); the
// final norm keeps its weight.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tandem::cuda {

// x, out: [T, dim] bf16 row-major, dim % 8 == 0; w: [dim] or null (all ones): out =
// bf16(w * bf16(x * r)) (w null: bf16(x * r)); x is only read.
void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int T, int dim,
             float eps, cudaStream_t stream);

// The unit-weight norm into fp32 rows, unrounded: out = x * r ([T, dim] floats).
void rmsnorm_f32(const __nv_bfloat16* x, float* out, int T, int dim, float eps,
                 cudaStream_t stream);

// W[n, k] = bf16(W[n, k] * w[k]) for a [rows, K] weight: a norm's weight moved into the
// product after it, (x * r * w) W^T = r (x (W diag(w))^T), so the product can read the
// unnormalised x and scale its rows by r.
void fold_norm_weight(__nv_bfloat16* W, size_t rows, int K, const __nv_bfloat16* w,
                      cudaStream_t stream);

}  // namespace tandem::cuda
