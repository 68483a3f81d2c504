#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/gemv_fp8.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/launch.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
// 16-byte code chunks of one K block (128 / 16): chunk c reads scale column c / 8.
constexpr int kChunksPerBlock = 8;
constexpr int kScaleRowsPerBlock = 128;
// Default 16-byte weight loads in flight per lane and row. The bf16 gemv's best was 2
// (gemv.cu), but here a warp's row is half as many loads (K / 16 of them: 10 per lane at
// K = 5120) and twice the work follows each one. H200, Qwen3-14B shapes at one row (us, 2 /
// 4 loads): qkv 12.5 / 14.8, o 12.7 / 11.0, gate_up 48.7 / 48.8, down 37.4 / 29.3; 4 loads
// take the two products with the most loads per lane. TANDEM_GEMV_FP8_UNROLL=2|4 or
// gemv_fp8_force_unroll select one for A/B runs.
constexpr int kDefaultUnroll = 4;

// 16 e4m3 codes to their exact values as floats (e4m3 is exact in fp16, fp16 in fp32): 8
// hardware conversions to half2 on sm_89+, then widening.
__device__ __forceinline__ void fp8x16_to_float(const int4& q, float f[16]) {
  const uint32_t w[4] = {uint32_t(q.x), uint32_t(q.y), uint32_t(q.z), uint32_t(q.w)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 lo = f16x2_to_float2(kv_fp8x2_to_f16x2(w[i]));
    const float2 hi = f16x2_to_float2(kv_fp8x2_to_f16x2(w[i] >> 16));
    f[4 * i] = lo.x, f[4 * i + 1] = lo.y, f[4 * i + 2] = hi.x, f[4 * i + 3] = hi.y;
  }
}

// SWIGLU: Wq holds gate rows [0, N) then up rows [N, 2N) (scales likewise: the fused
// matrix's rows); the warp for column n reads rows n and N + n and writes
// bf16(bf16(silu(g)) * u) with g, u rounded to bf16 as gemv's SwiGLU form does.
template <int T, bool SWIGLU, int UNROLL>
__global__ void __launch_bounds__(kThreads)
    gemv_fp8_kernel(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds, bf16_t* Y,
                    int ldy, int N, int K, bool accumulate) {
  constexpr int R = SWIGLU ? 2 : 1;  // weight rows per warp
  launch_dependents();               // a following PDL kernel (the next GEMV) may launch and wait
  const int n = (blockIdx.x * kThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  const int4* w[R];
  const float* s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const size_t row = size_t(n) + size_t(r) * N;
    w[r] = reinterpret_cast<const int4*>(Wq + row * K);
    s[r] = S + (row / kScaleRowsPerBlock) * lds;
  }
  const int K16 = K / 16;
  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  int4 wv[R][UNROLL];
  float sc[R][UNROLL];
  // Each chunk's scale is loaded with its codes (the chunk lies in one K block: scale column
  // c / 8), so a scale that misses L1 costs no second wait; the scales are small and shared
  // by the 128 rows of a block, hence cached loads.
  auto load_w = [&](int c0) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wv[r][u] = c < K16 ? __ldcs(w[r] + c) : make_int4(0, 0, 0, 0);  // streamed: read once
        sc[r][u] = c < K16 ? __ldg(s[r] + c / kChunksPerBlock) : 0.0f;
      }
    }
  };
  // Wait for the previous kernel's output X (programmatic dependent launch: this kernel may
  // start early). The weights and scales are not written by earlier kernels, but issuing the
  // first weight loads before the wait measured slower for the bf16 gemv (gemv.cu).
  grid_dependency_wait();
  for (int c0 = lane; c0 < K16; c0 += 32 * UNROLL) {
    load_w(c0);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + 32 * u;
      if (c >= K16) break;
      // The chunk's dot products are summed unscaled in fp32, then added to the accumulators
      // times the block's scale.
      float wf[R][16];
#pragma unroll
      for (int r = 0; r < R; ++r) fp8x16_to_float(wv[r][u], wf[r]);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const int4* xr = reinterpret_cast<const int4*>(X + size_t(t) * ldx) + 2 * c;
        float xf[16];
        unpack8(__ldg(xr), xf);
        unpack8(__ldg(xr + 1), xf + 8);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d = 0.0f;
#pragma unroll
          for (int i = 0; i < 16; ++i) d = fmaf(wf[r][i], xf[i], d);
          acc[r][t] = fmaf(sc[r][u], d, acc[r][t]);
        }
      }
    }
  }
  // Every lane holds the sums after the butterfly; lane t writes row t (not lane 0 all T).
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float v = warp_sum(acc[0][t]);
    if constexpr (SWIGLU) {
      v = swiglu_bf16(v, warp_sum(acc[R - 1][t]));
    }
    if (lane == t) {
      bf16_t* y = Y + size_t(t) * ldy + n;
      *y = __float2bfloat16(accumulate ? v + __bfloat162float(*y) : v);
    }
  }
}

std::atomic<int> g_forced_unroll{0};  // gemv_fp8_force_unroll

// Loads in flight per lane: kDefaultUnroll, or TANDEM_GEMV_FP8_UNROLL=2 / 4, or the forced one.
int unroll() {
  if (const int f = g_forced_unroll.load(std::memory_order_relaxed)) return f;
  static const int u = [] {
    const char* e = std::getenv("TANDEM_GEMV_FP8_UNROLL");
    if (e && std::string(e) == "2") return 2;
    if (e && std::string(e) == "4") return 4;
    return kDefaultUnroll;
  }();
  return u;
}

template <int T, int UNROLL>
void launch(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds, bf16_t* Y,
            int ldy, int N, int K, bool swiglu, bool accumulate, cudaStream_t stream) {
  const dim3 grid(unsigned((size_t(N) * 32 + kThreads - 1) / kThreads)), block(kThreads);
  if (swiglu)
    launch_pdl(gemv_fp8_kernel<T, true, UNROLL>, grid, block, 0, stream, X, ldx, Wq, S, lds, Y, ldy,
               N, K, accumulate);
  else
    launch_pdl(gemv_fp8_kernel<T, false, UNROLL>, grid, block, 0, stream, X, ldx, Wq, S, lds, Y,
               ldy, N, K, accumulate);
}

// launch<T> for the T in [1, kGemvFp8MaxTokens] given at run time (Is = T - 1).
template <int... Is>
void launch_rows(std::integer_sequence<int, Is...>, int T, const bf16_t* X, int ldx,
                 const uint8_t* Wq, const float* S, int lds, bf16_t* Y, int ldy, int N, int K,
                 bool swiglu, bool accumulate, cudaStream_t stream) {
  const bool four = unroll() == 4;
  ((T == Is + 1 &&
    (four ? launch<Is + 1, 4>(X, ldx, Wq, S, lds, Y, ldy, N, K, swiglu, accumulate, stream)
          : launch<Is + 1, 2>(X, ldx, Wq, S, lds, Y, ldy, N, K, swiglu, accumulate, stream),
     true)) ||
   ...);
}

}  // namespace

void gemv_fp8_force_unroll(int u) {
  if (u != 0 && u != 2 && u != 4)
    cuda_fail("gemv_fp8_force_unroll", "loads in flight must be 2 or 4 (0: default)", __FILE__,
              __LINE__);
  g_forced_unroll.store(u, std::memory_order_relaxed);
}

void gemv_fp8(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds, bf16_t* Y,
              int ldy, int T, int N, int K, cudaStream_t stream, bool swiglu, bool accumulate) {
  if (T < 1 || T > kGemvFp8MaxTokens)
    cuda_fail("gemv_fp8", "T must be in [1, 8]", __FILE__, __LINE__);
  if (N < 1 || K < 16 || K % 16)
    cuda_fail("gemv_fp8", "N must be positive, K a positive multiple of 16", __FILE__, __LINE__);
  if (ldx % 8 || (T > 1 && (ldx < K || ldy < N)) || lds < (K + 127) / 128)
    cuda_fail("gemv_fp8", "ldx % 8 == 0, rows that do not overlap, lds >= ceil(K / 128)", __FILE__,
              __LINE__);
  if (reinterpret_cast<uintptr_t>(X) % 16 || reinterpret_cast<uintptr_t>(Wq) % 16)
    cuda_fail("gemv_fp8", "X and Wq must be 16-byte aligned", __FILE__, __LINE__);
  if (swiglu && accumulate) cuda_fail("gemv_fp8", "SwiGLU does not accumulate", __FILE__, __LINE__);
  launch_rows(std::make_integer_sequence<int, kGemvFp8MaxTokens>{}, T, X, ldx, Wq, S, lds, Y, ldy,
              N, K, swiglu, accumulate, stream);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
