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
#include "backend/cuda/mma.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kCoreMaxTokens = 8;  // rows of the CUDA-core form (one template each)
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
  // first weight loads before the wait measured slower for the bf16 gemv (gemv.cu) and no
  // faster here (batch-1 decode with FP8 weights 175.3 against 176.1 tok/s).
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

// The tensor-core form: one thread block per 16 output columns (weight rows), its 8 warps
// taking every 8th 128-wide K block, then summed through shared memory. Each K block is 8
// mma.m16n8k16 steps (fp16 in, fp32 accumulate): A = the 16 rows' codes widened to fp16,
// B = up to 8 rows of X per 8-row group (NT groups), rounded to fp16. Dot products do not
// depend on the order of k, so each lane's share of a step is contiguous in memory: lane
// (g = lane / 4, t = lane % 4) loads codes k0 + 16 t .. + 15 of rows g and g + 8 (one 16-byte
// load each per 64-wide half block) and the same 16 values of X row g of each group, and
// step s of the half uses its words s: fragment k positions 2t, 2t+1 <- codes 4s, 4s+1 and
// 2t+8, 2t+9 <- codes 4s+2, 4s+3, the same for A and B. Per 16 codes a lane issues 8
// conversions and a quarter of X's, against 16 conversions and 16 FMAs per row in the
// CUDA-core form, so its time hardly grows with the rows: H200, Qwen3-14B shapes, 2.1-3.0
// TB/s of weights at 2-8 rows where the CUDA-core form falls from 2.1-3.0 to 0.8-0.9. At 1
// row the CUDA-core form streams faster (2.7-3.8 TB/s): this one's loads take 64 bytes of
// each of 16 rows, not 512 of one. (Tried: two K blocks in flight a warp, 7-15% slower; the
// L2::256B fetch hint, faster alone but 3-6% slower decode steps.)
constexpr int kTcWarps = 8;
constexpr int kTcRows = 16;  // output columns a block

// C fragments (4 floats a lane) of R matrices x NT row groups, zeroed.
template <int R, int NT>
__device__ __forceinline__ void zero_fragments(float (&c)[R][NT][4]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[r][j][i] = 0.0f;
}

// Two bf16 values to fp16 (rounded; X is a product's input, in fp16 range).
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t b) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b));
  const __half2 h = __float22half2_rn(f);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <int NT, bool SWIGLU>
__global__ void __launch_bounds__(kTcWarps * 32)
    gemv_fp8_tc_kernel(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds,
                       bf16_t* Y, int ldy, int T, int N, int K, bool accumulate) {
  constexpr int R = SWIGLU ? 2 : 1;  // weight matrices (gate, up)
  launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kTcRows;
  const int na = n0 + g, nb = n0 + g + 8;  // this lane's two weight rows (of each matrix)
  const bool va = na < N, vb = nb < N;
  const uint8_t* wa[R];
  const uint8_t* wb[R];
  const float* sa[R];
  const float* sb[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const size_t ra = size_t(va ? na : 0) + size_t(r) * N, rb = size_t(vb ? nb : 0) + size_t(r) * N;
    wa[r] = Wq + ra * K;
    wb[r] = Wq + rb * K;
    sa[r] = S + (ra / kScaleRowsPerBlock) * lds;
    sb[r] = S + (rb / kScaleRowsPerBlock) * lds;
  }
  const bf16_t* xr[NT];
  bool vx[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    vx[j] = 8 * j + g < T;
    xr[j] = X + size_t(vx[j] ? 8 * j + g : 0) * ldx;
  }
  float acc[R][NT][4];
  zero_fragments(acc);

  grid_dependency_wait();  // X is the previous kernel's output
  const int KB = (K + 127) / 128;
  for (int kb = warp; kb < KB; kb += kTcWarps) {
    int4 qa[R][2], qb[R][2], xv[NT][2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // 64-wide halves: codes of rows g and g + 8, X rows
      const int k = kb * 128 + h * 64 + 16 * t;
      const bool vk = k < K;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        qa[r][h] = vk && va ? __ldcs(reinterpret_cast<const int4*>(wa[r] + k)) : int4{};
        qb[r][h] = vk && vb ? __ldcs(reinterpret_cast<const int4*>(wb[r] + k)) : int4{};
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const bool v = vk && vx[j];
        const int4* p = reinterpret_cast<const int4*>(xr[j] + k);
        xv[j][h][0] = v ? __ldg(p) : int4{};
        xv[j][h][1] = v ? __ldg(p + 1) : int4{};
      }
    }
    float sca[R], scb[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sca[r] = va ? __ldg(sa[r] + kb) : 0.0f;
      scb[r] = vb ? __ldg(sb[r] + kb) : 0.0f;
    }
    float blk[R][NT][4];
    zero_fragments(blk);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        uint32_t b[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          // X values 4s .. 4s+3 of the lane's 16: words 2s and 2s + 1 of its two loads.
          const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xv[j][h][s >> 1]);
          b[j][0] = bf16x2_to_f16x2(xw[2 * (s & 1)]);
          b[j][1] = bf16x2_to_f16x2(xw[2 * (s & 1) + 1]);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t wa4 = reinterpret_cast<const uint32_t*>(&qa[r][h])[s];
          const uint32_t wb4 = reinterpret_cast<const uint32_t*>(&qb[r][h])[s];
          const uint32_t a[4] = {kv_fp8x2_to_f16x2(wa4), kv_fp8x2_to_f16x2(wb4),
                                 kv_fp8x2_to_f16x2(wa4 >> 16), kv_fp8x2_to_f16x2(wb4 >> 16)};
#pragma unroll
          for (int j = 0; j < NT; ++j) mma_f16(blk[r][j], a, b[j][0], b[j][1]);
        }
      }
      // The block's sums times its scales: c0, c1 are row g's, c2, c3 row g + 8's.
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        acc[r][j][0] = fmaf(sca[r], blk[r][j][0], acc[r][j][0]);
        acc[r][j][1] = fmaf(sca[r], blk[r][j][1], acc[r][j][1]);
        acc[r][j][2] = fmaf(scb[r], blk[r][j][2], acc[r][j][2]);
        acc[r][j][3] = fmaf(scb[r], blk[r][j][3], acc[r][j][3]);
      }
  }
  // Sum the warps' partial results: value v = (j * 4 + i) * 32 + lane of matrix r.
  constexpr int V = NT * 4 * 32;
  __shared__ float part[kTcWarps][R][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[warp][r][(j * 4 + i) * 32 + lane] = acc[r][j][i];
  __syncthreads();
  for (int v = threadIdx.x; v < V; v += kTcWarps * 32) {
    float sum[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sum[r] = 0.0f;
#pragma unroll
      for (int w = 0; w < kTcWarps; ++w) sum[r] += part[w][r][v];
    }
    // Fragment position of value v: lane l = v % 32, c index i, group j.
    const int l = v & 31, i = (v >> 5) & 3, j = v >> 7;
    const int n = n0 + (l >> 2) + (i >= 2 ? 8 : 0);
    const int tok = 8 * j + 2 * (l & 3) + (i & 1);
    if (n >= N || tok >= T) continue;
    bf16_t* y = Y + size_t(tok) * ldy + n;
    float out = sum[0];
    if constexpr (SWIGLU) out = swiglu_bf16(sum[0], sum[R - 1]);
    *y = __float2bfloat16(accumulate ? out + __bfloat162float(*y) : out);
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

std::atomic<int> g_forced_kernel{-1};  // gemv_fp8_force_kernel

// The form for T rows: the CUDA-core one up to kCoreMaxTokens rows only where asked for
// (TANDEM_GEMV_FP8_TC=0, or the override), the tensor-core one otherwise.
bool use_tc(int T) {
  if (T > kCoreMaxTokens) return true;
  if (const int f = g_forced_kernel.load(std::memory_order_relaxed); f >= 0) return f == 1;
  // From this many rows (TANDEM_GEMV_FP8_TC=N; 0: never). H200, Qwen3-14B shapes: the
  // CUDA-core form wins at 1 row (13.4 against 15.6 us for qkv, 46.8 / 59.2 for gate/up), the
  // two are even at 2 (decode b=2 310.5 / 305.9 tok/s), and the tensor cores win from there
  // on (b=4 607 / 532, b=8 1,164 / 1,043; qkv 15.4 against 46.0 us at 8 rows).
  static const int from = [] {
    const char* e = std::getenv("TANDEM_GEMV_FP8_TC");
    if (!e) return 3;
    const int v = std::atoi(e);
    return v <= 0 ? kCoreMaxTokens + 1 : v;
  }();
  return T >= from;
}

template <int NT>
void launch_tc(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds, bf16_t* Y,
               int ldy, int T, int N, int K, bool swiglu, bool accumulate, cudaStream_t stream) {
  const dim3 grid(unsigned((N + kTcRows - 1) / kTcRows)), block(kTcWarps * 32);
  if (swiglu)
    launch_pdl(gemv_fp8_tc_kernel<NT, true>, grid, block, 0, stream, X, ldx, Wq, S, lds, Y, ldy, T,
               N, K, accumulate);
  else
    launch_pdl(gemv_fp8_tc_kernel<NT, false>, grid, block, 0, stream, X, ldx, Wq, S, lds, Y, ldy, T,
               N, K, accumulate);
}

// launch<T> for the T in [1, kCoreMaxTokens] given at run time (Is = T - 1).
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

void gemv_fp8_force_kernel(int k) {
  if (k < -1 || k > 1)
    cuda_fail("gemv_fp8_force_kernel", "kernel must be 0 (CUDA cores), 1 (tensor cores) or -1",
              __FILE__, __LINE__);
  g_forced_kernel.store(k, std::memory_order_relaxed);
}

void gemv_fp8_force_unroll(int u) {
  if (u != 0 && u != 2 && u != 4)
    cuda_fail("gemv_fp8_force_unroll", "loads in flight must be 2 or 4 (0: default)", __FILE__,
              __LINE__);
  g_forced_unroll.store(u, std::memory_order_relaxed);
}

void gemv_fp8(const bf16_t* X, int ldx, const uint8_t* Wq, const float* S, int lds, bf16_t* Y,
              int ldy, int T, int N, int K, cudaStream_t stream, bool swiglu, bool accumulate) {
  if (T < 1 || T > kGemvFp8MaxTokens)
    cuda_fail("gemv_fp8", "T must be in [1, 16]", __FILE__, __LINE__);
  if (N < 1 || K < 16 || K % 16)
    cuda_fail("gemv_fp8", "N must be positive, K a positive multiple of 16", __FILE__, __LINE__);
  if (ldx % 8 || (T > 1 && (ldx < K || ldy < N)) || lds < (K + 127) / 128)
    cuda_fail("gemv_fp8", "ldx % 8 == 0, rows that do not overlap, lds >= ceil(K / 128)", __FILE__,
              __LINE__);
  if (reinterpret_cast<uintptr_t>(X) % 16 || reinterpret_cast<uintptr_t>(Wq) % 16)
    cuda_fail("gemv_fp8", "X and Wq must be 16-byte aligned", __FILE__, __LINE__);
  if (swiglu && accumulate) cuda_fail("gemv_fp8", "SwiGLU does not accumulate", __FILE__, __LINE__);
  if (!use_tc(T))
    launch_rows(std::make_integer_sequence<int, kCoreMaxTokens>{}, T, X, ldx, Wq, S, lds, Y, ldy, N,
                K, swiglu, accumulate, stream);
  else if (T <= 8)
    launch_tc<1>(X, ldx, Wq, S, lds, Y, ldy, T, N, K, swiglu, accumulate, stream);
  else
    launch_tc<2>(X, ldx, Wq, S, lds, Y, ldy, T, N, K, swiglu, accumulate, stream);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
