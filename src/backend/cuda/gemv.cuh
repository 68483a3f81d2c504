#pragma once
// Small-batch linear layer for decode: Y[T, N] = X[T, K] W[N, K]^T for T <= 8, bf16 in and
// out, fp32 accumulate. Memory-bound: W is read once with 16-byte streaming loads, one warp
// per output column n and several loads in flight per lane; X (tiny) comes through L1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tandem::cuda {

constexpr int kGemvMaxTokens = 8;

// X: [T, K] with row stride ldx; W: [N, K] (HF's [out, in]); Y: [T, N] with row stride ldy.
// K % 8 == 0, ldx % 8 == 0, 1 <= T <= kGemvMaxTokens.
// swiglu: W is the fused [2N, K] gate/up weight and Y[t, n] = bf16(silu(g) * u) with
// g = (X W^T)[t, n], u = (X W^T)[t, N + n] (the MLP's activation without its [T, 2N] output).
// accumulate (not with swiglu): Y = bf16(X W^T + Y), the sum in fp32.
void gemv(const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, __nv_bfloat16* Y, int ldy, int T,
          int N, int K, cudaStream_t stream, bool swiglu = false, bool accumulate = false);

// The SwiGLU form over fp32 X rows (a norm's unrounded output, rmsnorm_f32), for T <= 2:
// the loop then loads X without unpacking bf16. ldx % 4 == 0, X 16-byte aligned.
void gemv_swiglu_f32x(const float* X, int ldx, const __nv_bfloat16* W, __nv_bfloat16* Y, int ldy,
                      int T, int N, int K, cudaStream_t stream);
}  // namespace tandem::cuda
