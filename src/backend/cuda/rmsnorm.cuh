#pragma once
// RMSNorm fused with the residual add that precedes it in every Qwen3 block:
//   x += delta            (bf16, when delta is given; x is the residual stream, updated)
//   out = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))   (fp32 statistics, as HF computes it)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tandem::cuda {

// x, delta, out: [T, dim] bf16 row-major; w: [dim]; dim % 8 == 0. delta may be null.
void add_rmsnorm(__nv_bfloat16* x, const __nv_bfloat16* delta, const __nv_bfloat16* w,
                 __nv_bfloat16* out, int T, int dim, float eps, cudaStream_t stream);

// The same with delta given as `parts` fp32 partial sums (a split-K product's partials:
// parts[p * part_stride + t * dim + c]): delta = bf16(sum over p, in order), so the
// reduction of the product and the norm after it are one kernel.
void add_rmsnorm_parts(__nv_bfloat16* x, const float* parts, int nparts, size_t part_stride,
                       const __nv_bfloat16* w, __nv_bfloat16* out, int T, int dim, float eps,
                       cudaStream_t stream);

}  // namespace tandem::cuda
