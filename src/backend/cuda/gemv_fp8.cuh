#pragma once
// Small-batch linear layer for decode over FP8 weights (weight-only quantisation): the
// block-scaled e4m3 weights of core/fp8.h, bf16 activations in and out, fp32 accumulate.
// Two forms. CUDA cores (1-8 rows; the default at 1-2): gemv.cuh's plan (a warp per output
// column, 16-byte streaming weight loads, several in flight per lane), each load 16 codes
// of one K block, whose dot products the lane scales once. Tensor cores (1-16 rows; the
// default from 3, TANDEM_GEMV_FP8_TC=N sets where it starts, 0 keeps 1-8 rows on CUDA
// cores): a block per 16 output columns, codes widened to fp16 and X rounded to fp16 into
// mma.m16n8k16 steps, one scale per 128-wide K block applied to the fp32 block sums.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

constexpr int kGemvFp8MaxTokens = 16;

// Y[T, N] = X[T, K] Wd[N, K]^T with Wd[n, k] = e4m3(Wq[n, k]) * S[(n / 128) * lds + k / 128]:
// FP8 weights in 128 x 128 blocks (core/fp8.h), bf16 X and Y, fp32 accumulate.
// K % 16 == 0, ldx % 8 == 0, X and Wq 16-byte aligned, 1 <= T <= kGemvFp8MaxTokens,
// lds >= ceil(K/128). The tensor-core form takes X as fp16 (values past 65504 saturate).
// swiglu: Wq is the fused [2N, K] gate/up weight (scales of the fused matrix: the up row N + n
// uses scale row (N + n) / 128) and Y[t, n] = bf16(silu(g) * u) exactly as gemv's SwiGLU form
// rounds it; accumulate (not with swiglu): Y = bf16(X Wd^T + Y), the sum in fp32.
void gemv_fp8(const __nv_bfloat16* X, int ldx, const uint8_t* Wq, const float* S, int lds,
              __nv_bfloat16* Y, int ldy, int T, int N, int K, cudaStream_t stream,
              bool swiglu = false, bool accumulate = false);

// For A/B measurements of the 16-byte weight loads in flight per lane (2 or 4; default 4):
// the environment's TANDEM_GEMV_FP8_UNROLL (read once), or this override for the calls that
// follow it (0 drops it), which lets one timing run compare both. Not for the serving path.
void gemv_fp8_force_unroll(int loads);

// For A/B measurements and tests: the form for rows 1-8, 0 CUDA cores, 1 tensor cores, -1
// the default (see above). Rows 9-16 always take tensor cores.
void gemv_fp8_force_kernel(int kernel);

}  // namespace tandem::cuda
