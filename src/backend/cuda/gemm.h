#pragma once
// Linear layers: Y[T, N] = X[T, K] W[N, K]^T, bf16 row-major X and Y, weights in HF's
// [out, in] layout, fp32 accumulate. T <= gemv_max_tokens goes to the small-batch GEMV
// (gemv.cuh), which reads the weights closer to the bandwidth limit; larger T to cuBLASLt,
// except the MLP's gate/up product at 8..128 rows, which the skinny GEMM (skinny_gemm.cuh)
// does with SwiGLU fused.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "backend/cuda/skinny_gemm.cuh"

namespace tandem::cuda {

// Sets the n extent (rows of X and Y, T) that a plan's B and C layouts describe.
void set_layout_rows(cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int T);

class Gemm {
 public:
  // gemv_max_tokens: 0 sends every product to cuBLASLt (the portable library path) but the
  // SwiGLU products the skinny GEMM takes.
  explicit Gemm(int gemv_max_tokens = 4, size_t workspace_bytes = size_t(64) << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void set_gemv_max_tokens(int t) { gemv_max_tokens_ = t; }
  int gemv_max_tokens() const { return gemv_max_tokens_; }
  // The skinny GEMM's range for the SwiGLU product: rows [min, max] and the smallest fused
  // weight. Measured on the H200 (Qwen3-14B, docs/PERFORMANCE.md): its weight stream is about
  // as fast as cuBLASLt's and it saves the SwiGLU kernel, so decode steps of 8-128 rows ran
  // 0.6-2.9% faster; as a plain linear layer it was slower than cuBLASLt in the model
  // (shorter products do not hide its start), so linear() uses it only when asked (below).
  // TANDEM_SKINNY=0 (max 0) turns it off and TANDEM_SKINNY_MIN_TOKENS sets the minimum, for
  // A/B measurements.
  void set_skinny_tokens(int min, int max) {
    skinny_min_tokens_ = min;
    skinny_max_tokens_ = max;
  }
  void set_skinny_min_bytes(size_t b) { skinny_min_bytes_ = b; }
  // The skinny GEMM's range for plain products in linear(), the accumulating ones (o, down)
  // included: rows [min, max] of weights of at least min_bytes (default: none; on the H200
  // every plain product was slower this way, alone and in decode steps: PERFORMANCE.md,
  // sixth and fifteenth sessions). TANDEM_SKINNY_LINEAR=min:max[:MiB] sets them (MiB
  // default 1024), TANDEM_SKINNY_MAX_TOKENS the SwiGLU maximum.
  void set_skinny_linear_tokens(int min, int max, size_t min_bytes = 0) {
    skinny_linear_min_ = min;
    skinny_linear_max_ = max;
    skinny_linear_min_bytes_ = min_bytes;
  }

  // ldx/ldy: row strides of X and Y in elements (0: K and N). accumulate: Y = bf16(X W^T + Y)
  // (the residual add of the layer's output, in fp32 before the rounding). Capturable in a
  // CUDA graph once the shape has been run outside capture (the algorithm is chosen then).
  void linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T, int N, int K,
              cudaStream_t stream, int ldx = 0, int ldy = 0, bool accumulate = false);

  // The MLP's first half: act[T, I] = silu(X W_gate^T) * (X W_up^T), with W_gate_up the fused
  // [2I, K] weight. Small T: one fused GEMV; otherwise cuBLASLt into `scratch` [T, 2I], then
  // the SwiGLU kernel. With `norm`, X holds unnormalised rows and W_gate_up the norm's weight
  // folded in (rmsnorm.cuh): the skinny GEMM scales its rows itself; any other path first
  // writes the normalised rows to norm->h [T, K] (for the GEMV at 1-2 rows in fp32: h must
  // hold 2 K floats).
  struct RowNorm {
    float eps = 0.0f;
    __nv_bfloat16* h = nullptr;
  };
  void linear_swiglu(const __nv_bfloat16* X, const __nv_bfloat16* W_gate_up, __nv_bfloat16* act,
                     __nv_bfloat16* scratch, int T, int I, int K, cudaStream_t stream,
                     const RowNorm* norm = nullptr);

  // Forces cuBLASLt regardless of T (for tests and benchmarks).
  void cublas_linear(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int T, int N,
                     int K, cudaStream_t stream, int ldx = 0, int ldy = 0, bool accumulate = false);

  // How cuBLASLt algorithms are chosen: kHeuristic (default) takes the library's first
  // answer; kTimed times its top 8 candidates on the first product of each shape bucket and
  // keeps the fastest (TANDEM_GEMM_TUNE=1 selects it at start-up). On the H200 timing saved
  // 1.7-3% of GEMM time per pass but measured no faster end to end (engine C=64 4,203 vs
  // 4,171 tok/s; prefill 512 20.3k vs 21.3k), so it is off.
  enum class Choice { kTimed, kHeuristic };
  void set_choice(Choice c) { choice_ = c; }

  // Plans are per (bucket of T, N, K, ldx, ldy, accumulate): T rounds up to a bucket (exact up to
  // 16, then steps of 16/32/64/256), so an engine whose step sizes vary keeps a bounded set. Each
  // bucket's algorithm is the library's choice for the bucket's largest T, so no T in it
  // needs more tiles than that.
  static int bucket(int T);
  size_t num_plans() const { return plans_.size(); }
  // Products whose bucket's algorithm refused their exact T, and the exact-shape algorithms
  // chosen for them (each chosen once, then reused).
  uint64_t exact_fallbacks() const { return exact_fallbacks_; }
  size_t num_exact_algos() const { return exact_.size(); }

  struct TuneRecord {  // what the timing found for one plan (for `tandem bench`)
    int T, N, K, candidates;
    float heuristic_ms, best_ms;
  };
  const std::vector<TuneRecord>& tune_log() const { return tune_log_; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    int T = 0;  // the T the layouts b and c currently describe
  };
  // The op (fp32 compute, W transposed) and layouts of Y[T, N] = X[T, k] W[N, k]^T with row
  // strides ldw, ldx, ldy.
  static void init_plan(Plan& p, int k, int T, int N, int ldw, int ldx, int ldy);
  using PlanKey = std::tuple<int, int, int, int, int, bool>;  // T (bucket or exact), N, K,
                                                              // ldx, ldy, accumulate
  Plan& plan(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, const PlanKey& key,
             int T, cudaStream_t stream);
  // accumulate: Y is also an input, so candidates are not timed on it.
  void choose(Plan& p, const __nv_bfloat16* X, const __nv_bfloat16* W, void* Y, int T, int N, int K,
              cudaStream_t stream, int T_query, bool accumulate);
  void set_cols(Plan& p, int T);  // the n extent (rows of X and Y) the layouts describe
  cublasStatus_t run(const Plan& p, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* X,
                     const __nv_bfloat16* W, void* Y, cudaStream_t stream, bool accumulate);
  // Algorithms for exact T where a bucket's refuses it, by (T, N, K, ldx, ldy, accumulate).
  std::map<PlanKey, cublasLtMatmulAlgo_t> exact_;

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  int gemv_max_tokens_ = 4;
  int skinny_min_tokens_ = 8, skinny_max_tokens_ = kSkinnyMaxTokens;
  int skinny_linear_min_ = 8, skinny_linear_max_ = 0;
  size_t skinny_linear_min_bytes_ = size_t(1) << 30;
  size_t skinny_min_bytes_ = size_t(96) << 20;
  bool skinny_ok_ = false;  // skinny_supported()
  int sms_ = 0;
  // The product by the skinny GEMM (N output columns; the SwiGLU form reads 2N weight rows),
  // if it takes this shape (norm_eps >= 0: with the fused row norm; accumulate: plain form
  // adding into Y); plans by (T, N, K, swiglu).
  bool skinny(const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, __nv_bfloat16* Y, int ldy,
              int T, int N, int K, bool swiglu, cudaStream_t stream, float norm_eps = -1.0f,
              bool accumulate = false);
  std::map<std::tuple<int, int, int, bool>, SkinnyPlan> skinny_plans_;
  Choice choice_ = Choice::kHeuristic;
  bool query_first_t_ = false;  // TANDEM_GEMM_FIRST_T=1: choose for the first T a bucket sees
  std::map<PlanKey, Plan> plans_;
  std::vector<TuneRecord> tune_log_;
  uint64_t exact_fallbacks_ = 0;
};

}  // namespace tandem::cuda
