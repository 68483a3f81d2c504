#pragma once
// Linear layers with FP8 weights (fp8_weight.h): Y[T, N] = X[T, K] Wd[N, K]^T, bf16 X and Y,
// fp32 accumulate, Wd the dequantized weight. Up to gemv_max rows the weight-only GEMV
// (gemv_fp8.cuh) reads the codes and multiplies bf16 rows, for any GPU; from there on the
// rows are quantized too, one e4m3 code per value and one scale per 128-wide group
// (fp8_quant.cuh), and cuBLASLt's block-scaled FP8 GEMM (Hopper, cuBLASLt >= 12.9) runs the
// product on the FP8 tensor cores: W takes 128 x 128 block scales (A, transposed), the rows
// 1 x 128 scales (B), as Qwen3's FP8 checkpoints are served.
//
// A norm can be folded in: with norm_w, X holds the residual rows and the product reads
// RMSNorm(X) * norm_w (the layer's input or post-attention norm), computed on the way.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "backend/cuda/fp8_weight.h"

namespace tandem::cuda {

class Fp8Gemm {
 public:
  // Scratch for up to max_rows rows of up to max_k values (quantized rows, normalised rows).
  Fp8Gemm(int max_rows, int max_k, size_t workspace_bytes = size_t(32) << 20);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Whether this GPU and cuBLASLt run the block-scaled FP8 GEMM (probed once per device: an
  // algorithm must exist for a 64 x 256 x 256 product).
  static bool supported();
  static const std::string& unsupported_reason();  // why not, when not

  // Rows up to this go to the weight-only GEMV (at most kGemvFp8MaxTokens).
  void set_gemv_max_tokens(int t);
  int gemv_max_tokens() const { return gemv_max_; }

  // The library's block-scaled GEMM takes row counts that are multiples of 4 (cuBLASLt 13.1
  // on the H200; others have no algorithm), so the GEMM path runs padded_rows(T) rows: Y
  // must have room for that many, and the padding rows' values are left undefined.
  static int padded_rows(int T) { return (T + 3) / 4 * 4; }

  // Y = X Wd^T (accumulate: Y = bf16(X Wd^T + Y), the sum in fp32). ldx % 8 == 0,
  // K % 16 == 0, T <= max_rows, K <= max_k; Y (and scratch below) room for padded_rows(T)
  // rows. Capturable in a CUDA graph once the shape has run outside capture.
  void linear(const __nv_bfloat16* X, int ldx, const Fp8Weight& W, __nv_bfloat16* Y, int ldy, int T,
              int N, int K, cudaStream_t stream, bool accumulate = false,
              const __nv_bfloat16* norm_w = nullptr, float eps = 0.0f);

  // The MLP's first half: act[T, I] = silu(X Wg^T) * (X Wu^T) with the fused [2I, K] gate/up
  // weight; scratch [T, 2I] holds the product on the GEMM path.
  void linear_swiglu(const __nv_bfloat16* X, const Fp8Weight& W_gate_up, __nv_bfloat16* act,
                     __nv_bfloat16* scratch, int T, int I, int K, cudaStream_t stream,
                     const __nv_bfloat16* norm_w = nullptr, float eps = 0.0f);

  // The block-scaled product on rows already quantized by quantize_rows_fp8 (xq [T, K],
  // xs [ceil(K/128)][T]); T a multiple of 4 (tests and benchmarks).
  void gemm(const uint8_t* xq, const float* xs, const Fp8Weight& W, __nv_bfloat16* Y, int ldy,
            int T, int N, int K, cudaStream_t stream, bool accumulate = false);

  size_t num_plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    int T = 0;
  };
  using Key = std::tuple<int, int, int, int, bool>;  // T bucket, N, K, ldy, accumulate
  Plan& plan(const Key& key, int T, const float* ws, const float* xs);
  void set_cols(Plan& p, int T);
  bool choose(Plan& p, int T_query);
  // The rows into xq_/xs_, padded to padded_rows(T) (returned).
  int quantize(const __nv_bfloat16* X, int ldx, int T, int K, cudaStream_t stream,
               const __nv_bfloat16* norm_w, float eps);

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  int max_rows_ = 0, max_k_ = 0;
  int gemv_max_ = 8;
  uint8_t* xq_ = nullptr;       // [max_rows, max_k] codes
  float* xs_ = nullptr;         // [ceil(max_k / 128), max_rows] scales
  __nv_bfloat16* h_ = nullptr;  // [kGemvFp8MaxTokens, max_k] normalised rows for the GEMV
  std::map<Key, Plan> plans_;
};

}  // namespace tandem::cuda
