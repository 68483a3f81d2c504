#pragma once
// Decode-sized linear layer on Hopper tensor cores: Y[T, N] = X[T, K] W[N, K]^T for T <= 128
// rows, bf16 in and out, fp32 accumulate. Memory-bound: each block (two warpgroups) streams a
// tile of 2 x `nw` weight rows and the X rows (padded to a multiple of 64) through a TMA
// pipeline of 128-wide K slices in shared memory, one block an SM, and multiplies them with
// wgmma (m64 n`nw` k16, once per 64 X rows) straight from shared memory, so the weights are
// read once whatever T is. `splits` blocks divide K as one
// thread-block cluster: each leaves its fp32 partial in its shared memory and each adds a
// slice of the rows over all of them in rank order (the result does not depend on timing),
// so no partial goes to global memory and no second kernel runs. The SwiGLU form pairs gate
// and up rows in one tile, so the MLP's [T, 2I] product is never stored; it is the form the
// model uses (gemm.h says why the plain one is not). sm_90a only (skinny_supported()); other
// GPUs use cuBLASLt. X rows and ldx must meet TMA's rules: X 16-byte aligned.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tandem::cuda {

constexpr int kSkinnyMaxTokens = 128;

struct SkinnyPlan {
  int nw = 144;    // wgmma N: weight rows a warpgroup, 144 or 80
  int splits = 1;  // blocks along K (a cluster), 1..8
  int rot = 1;     // K slices between neighbouring blocks' starting points
};

// Whether this GPU runs the kernel (compute capability 9.0 with sm_90a code in the build).
bool skinny_supported();

// The launch shape for `rows` weight rows (2I for the SwiGLU form), K and T on a GPU with
// `sms` multiprocessors: for the SwiGLU form 288-row tiles (160 where those would outnumber
// the SMs) with K split until about half the SMs stream; for plain products 160-row tiles
// split until about 0.6 of them do.
SkinnyPlan skinny_plan(int rows, int K, int T, int sms, bool swiglu);

// Whether a kernel for `plan` at T rows is built (nw 80 or 144, 1 <= T <= kSkinnyMaxTokens).
bool skinny_plan_fits(const SkinnyPlan& plan, int T);

// X: [T, K] with row stride ldx; W: [rows, K]; Y: [T, N] with row stride ldy.
// N % 2 == 0, K % 8 == 0, ldx % 8 == 0, ldy % 2 == 0, 1 <= T <= kSkinnyMaxTokens.
// swiglu false: rows = N. swiglu true: W is the fused [2N, K] gate/up weight and
// Y[t, n] = bf16(silu(g) * u) with g, u rounded to bf16 first (as the GEMV does).
// norm_eps >= 0 (SwiGLU form only): X rows are unnormalised residual rows and W holds the
// norm weight folded in (rmsnorm.cuh); g and u of row t are scaled by
// rsqrt(mean(X_t^2) + norm_eps) first, so the RMSNorm before the MLP needs no kernel.
// accumulate (plain form only): Y[t, n] = bf16(sum + Y[t, n]), the sum and the old value
// added in fp32 (a layer's residual add).
// Throws where skinny_supported() is false.
void skinny_gemm(const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, __nv_bfloat16* Y, int ldy,
                 int T, int N, int K, bool swiglu, const SkinnyPlan& plan, cudaStream_t stream,
                 float norm_eps = -1.0f, bool accumulate = false);

}  // namespace tandem::cuda
