#include <climits>
#include <cmath>

#include "backend/cuda/check.cuh"
#include "backend/cuda/sample.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 2048;  // widest digit: 11 bits
constexpr int kAll = INT_MAX;
constexpr int kCompact = 2048;  // top-k sets up to this size are copied to shared memory
// Probability mass in fixed point: weight (<= 1, the best token has 1) times 2^40, summed in
// 64-bit integers, so every histogram, prefix sum and total is exact and they all agree.
// A weight below 2^-41 counts as 0 (the host sampler would pick such a token with
// probability < 1e-12).
constexpr float kUnit = 1099511627776.0f;  // 2^40
using u64 = unsigned long long;

// Order-preserving key: a larger float gives a larger key (-0 is folded into +0, since the
// host compares floats and sees them equal).
__device__ __forceinline__ uint32_t key_of(float x) {
  const uint32_t u = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float value_of(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// A prefix of the total order (larger logit first, then smaller id): every entry with key
// greater than `key`, plus the first `e` ids among those equal to it (all when e == kAll).
struct Cut {
  uint32_t key;
  int e;
};
__device__ __forceinline__ bool whole_member(uint32_t k, Cut c) {
  return k > c.key || (k == c.key && c.e == kAll);
}
__device__ __forceinline__ Cut tighter(Cut a, Cut b) {
  if (a.key != b.key) return a.key > b.key ? a : b;
  return a.e <= b.e ? a : b;
}

struct Pick {
  uint32_t key;  // the chosen value
  int index;     // which of its entries, by increasing id
};

struct Smem {
  u64 mass[kBins];
  int count[kBins];
  float cval[kCompact];  // the top-k candidates, by increasing id (compact())
  int cid[kCompact];
  u64 wsum[kWarps];
  float wbest[kWarps];
  int wid[kWarps];
  int wcnt[kWarps];
  int found_bin, last_bin, result;
  u64 found_before;
};

// Where the entries come from: the row itself, or the compacted top-k candidates (in
// shared memory, by increasing id). Both list entries by increasing id.
struct RowSrc {
  const float* row;
  int n;
  __device__ __forceinline__ float value(int j) const { return row[j]; }
  __device__ __forceinline__ int id(int j) const { return j; }
};
struct ListSrc {
  const float* val;
  const int* ids;
  int n;
  __device__ __forceinline__ float value(int j) const { return val[j]; }
  __device__ __forceinline__ int id(int j) const { return ids[j]; }
};

__device__ __forceinline__ u64 units(float l, float m, float inv_t) {
  return __float2ull_rn(expf((l - m) * inv_t) * kUnit);
}

__device__ u64 block_sum(u64 v, Smem& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // earlier readers of wsum are done
  if ((threadIdx.x & 31) == 0) sh.wsum[threadIdx.x >> 5] = v;
  __syncthreads();
  u64 t = 0;
  for (int w = 0; w < kWarps; ++w) t += sh.wsum[w];
  return t;
}

// Mass of the entries inside `lim`.
template <class Src>
__device__ u64 prefix_mass(const Src& src, Cut lim, float m, float inv_t, Smem& sh) {
  u64 s = 0;
  for (int i = threadIdx.x; i < src.n; i += kThreads) {
    const float l = src.value(i);
    if (whole_member(key_of(l), lim)) s += units(l, m, inv_t);
  }
  u64 t = block_sum(s, sh);
  if (lim.e != kAll) t += u64(lim.e) * units(value_of(lim.key), m, inv_t);
  return t;
}

// Walks the entries inside `lim` in the total order and stops at the first one whose
// cumulative weight (count, or mass) is > target (strict) or >= target (not strict).
// Three radix passes (11, 11, 10 bits of the key); runs of equal keys are resolved by
// arithmetic, since their entries weigh the same.
template <class Src>
__device__ Pick select(const Src& src, Cut lim, u64 target, bool strict, bool counts, float m,
                       float inv_t, Smem& sh) {
  __syncthreads();  // every thread is done reading what the previous step left in sh
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t prefix = 0;
  int group = 0;
#pragma unroll 1
  for (int L = 0; L < 3; ++L) {
    const int bits = L < 2 ? 11 : 10, shift = L == 0 ? 21 : L == 1 ? 10 : 0;
    const int nb = 1 << bits, hi = shift + bits;
    for (int b = threadIdx.x; b < nb; b += kThreads) sh.mass[b] = 0, sh.count[b] = 0;
    if (threadIdx.x == 0) sh.found_bin = -1, sh.last_bin = -1;
    __syncthreads();
    for (int i = threadIdx.x; i < src.n; i += kThreads) {
      const float l = src.value(i);
      const uint32_t k = key_of(l);
      if ((L > 0 && (k >> hi) != (prefix >> hi)) || !whole_member(k, lim)) continue;
      const int d = int((k >> shift) & uint32_t(nb - 1));
      atomicAdd(&sh.mass[d], counts ? u64(1) : units(l, m, inv_t));
      if (L == 2) atomicAdd(&sh.count[d], 1);  // only the last level's group size is used
    }
    if (threadIdx.x == 0 && lim.e != kAll && (L == 0 || (lim.key >> hi) == (prefix >> hi))) {
      const int d = int((lim.key >> shift) & uint32_t(nb - 1));
      atomicAdd(&sh.mass[d], u64(lim.e) * (counts ? u64(1) : units(value_of(lim.key), m, inv_t)));
      atomicAdd(&sh.count[d], lim.e);
    }
    __syncthreads();

    // Bins in descending key order: thread t owns positions [t*per, t*per + per), bin =
    // nb-1-position. Exclusive/inclusive prefix sums over threads (exact integers).
    const int per = nb / kThreads;  // 4 or 2
    const int j0 = threadIdx.x * per;
    u64 local = 0;
    int lastnz = -1;
    for (int j = j0; j < j0 + per; ++j) {
      const u64 v = sh.mass[nb - 1 - j];
      local += v;
      if (v > 0) lastnz = j;
    }
    u64 incl = local;
    for (int o = 1; o < 32; o <<= 1) {
      const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == 31) sh.wsum[warp] = incl;
    if (lastnz >= 0) atomicMax(&sh.last_bin, lastnz);
    __syncthreads();
    u64 base = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) base += sh.wsum[w];
      total += sh.wsum[w];
    }
    const u64 before = base + incl - local, after = base + incl;
    const bool mine =
        strict ? (before <= target && target < after) : (before < target && target <= after);
    if (mine) {
      u64 acc = before;
      for (int j = j0; j < j0 + per; ++j) {
        const int b = nb - 1 - j;
        const u64 next = acc + sh.mass[b];
        if (sh.mass[b] > 0 && (strict ? target < next : target <= next)) {
          sh.found_bin = b;
          sh.found_before = acc;
          break;
        }
        acc = next;
      }
    }
    __syncthreads();
    int b;
    u64 bef;
    if (sh.found_bin >= 0) {
      b = sh.found_bin;
      bef = sh.found_before;
    } else if (sh.last_bin >= 0) {  // target at or past the total: the last entry with mass
      b = nb - 1 - sh.last_bin;
      bef = total - sh.mass[b];
    } else {  // nothing inside lim (cannot happen: lim always holds the best entry)
      b = nb - 1;
      bef = 0;
    }
    target = target > bef ? target - bef : 0;
    prefix |= uint32_t(b) << shift;
    if (L == 2) group = sh.count[b];
    __syncthreads();  // histograms are cleared next
  }
  const u64 w = counts ? 1 : units(value_of(prefix), m, inv_t);
  long long idx = 0;
  if (w > 0) idx = strict ? (long long)(target / w) : (long long)((target + w - 1) / w) - 1;
  idx = max(0ll, min(idx, (long long)group - 1));
  return {prefix, int(idx)};
}

// The index-th smallest id whose key is `key` (-1 if there is none).
template <class Src>
__device__ int find_id(const Src& src, uint32_t key, int index, Smem& sh) {
  __syncthreads();  // every thread is done reading what the previous step left in sh
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) sh.result = -1;  // published by the first barrier below
  int seen = 0;
  for (int t0 = 0; t0 < src.n; t0 += kThreads) {
    const int i = t0 + threadIdx.x;
    const bool hit = i < src.n && key_of(src.value(i)) == key;
    const unsigned bal = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) sh.wcnt[warp] = __popc(bal);
    __syncthreads();
    int below = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) below += sh.wcnt[w];
      total += sh.wcnt[w];
    }
    if (seen + total > index) {
      if (hit && seen + below + __popc(bal & ((1u << lane) - 1u)) == index) sh.result = src.id(i);
      __syncthreads();
      return sh.result;
    }
    seen += total;
    __syncthreads();  // wcnt is rewritten next
  }
  return -1;
}

// The draw without top-k and top-p: the host sampler walks the tokens by increasing id
// (no sort), with weights below min_p (tokens under `lt`) set to 0. The first id whose
// cumulative mass exceeds x, by a block-wide prefix sum over tiles of the row.
__device__ int draw_by_id(const float* row, int V, float m, float inv_t, float lt, u64 x,
                          Smem& sh) {
  __syncthreads();  // every thread is done reading what the previous step left in sh
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) sh.result = -1;  // published by the first barrier below
  u64 seen = 0;
  for (int t0 = 0; t0 < V; t0 += kThreads) {
    const int i = t0 + threadIdx.x;
    u64 w = 0;
    if (i < V) {
      const float l = row[i];
      if (l >= lt) w = units(l, m, inv_t);
    }
    u64 incl = w;
    for (int o = 1; o < 32; o <<= 1) {
      const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == 31) sh.wsum[warp] = incl;
    __syncthreads();
    u64 below = 0, total = 0;
    for (int w2 = 0; w2 < kWarps; ++w2) {
      if (w2 < warp) below += sh.wsum[w2];
      total += sh.wsum[w2];
    }
    const u64 after = seen + below + incl;
    if (w > 0 && after - w <= x && x < after) sh.result = i;
    __syncthreads();
    if (seen + total > x) return sh.result;
    seen += total;
  }
  return sh.result;
}

// Copies the entries of the row inside `lim` (at most kCompact) to sh.cval/cid by
// increasing id: those above lim.key, and the first lim.e of those equal to it.
__device__ int compact(const float* row, int V, Cut lim, Smem& sh) {
  __syncthreads();  // every thread is done reading what the previous step left in sh
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lower = (1u << lane) - 1u;
  int seen = 0, ties = 0;
  for (int t0 = 0; t0 < V; t0 += kThreads) {
    const int i = t0 + threadIdx.x;
    const float l = i < V ? row[i] : 0.0f;
    const uint32_t k = i < V ? key_of(l) : 0u;
    const bool above = i < V && k > lim.key, tie = i < V && k == lim.key;
    const unsigned ba = __ballot_sync(0xffffffffu, above), bt = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) sh.wcnt[warp] = __popc(ba), sh.wid[warp] = __popc(bt);
    __syncthreads();
    int a_below = 0, t_below = 0, a_total = 0, t_total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) a_below += sh.wcnt[w], t_below += sh.wid[w];
      a_total += sh.wcnt[w];
      t_total += sh.wid[w];
    }
    const int tie_rank = ties + t_below + __popc(bt & lower);
    // Position among the kept: kept above so far + kept ties so far.
    const int kept_ties_before = min(tie_rank, lim.e);
    const int pos = seen + a_below + __popc(ba & lower) + kept_ties_before;
    if ((above || (tie && tie_rank < lim.e)) && pos < kCompact) sh.cval[pos] = l, sh.cid[pos] = i;
    seen += a_total;
    ties += t_total;
    __syncthreads();  // wcnt/wid are rewritten next
  }
  return seen + min(ties, lim.e);
}

__device__ float min_p_threshold(float m, double inv_t, float min_p) {
  // The smallest float l with (l - m) * inv_t >= log(min_p) in double: the host keeps a token
  // when exp((l - m) * inv_t) >= min_p.
  const double a = log(double(min_p));
  auto ok = [&](float l) { return (double(l) - double(m)) * inv_t >= a; };
  float l = float(double(m) + a / inv_t);
  for (int i = 0; i < 8 && !ok(l); ++i) l = nextafterf(l, INFINITY);
  for (int i = 0; i < 8 && ok(nextafterf(l, -INFINITY)); ++i) l = nextafterf(l, -INFINITY);
  return l;
}

// Top-p over the entries inside `lim` (what top-k kept), then min-p, then the draw: the
// token id, or -1 if something went wrong (the caller then takes the argmax).
template <class Src>
__device__ int truncate_and_draw(const Src& src, Cut lim, const SampleRow& p, float m,
                                 double inv_td, float inv_t, Smem& sh) {
  if (p.top_p < 1.0f) {
    const u64 z = prefix_mass(src, lim, m, inv_t, sh);
    const double nucleus = ceil(double(p.top_p) * double(z));
    const Pick q = select(src, lim, u64(max(nucleus, 1.0)), false, false, m, inv_t, sh);
    lim = tighter(lim, {q.key, q.index + 1});
  }
  if (p.min_p > 0.0f) lim = tighter(lim, {key_of(min_p_threshold(m, inv_td, p.min_p)), kAll});
  // The first entry whose cumulative mass exceeds uniform * kept.
  const u64 kept = prefix_mass(src, lim, m, inv_t, sh);
  if (kept == 0) return -1;  // cannot happen: the best entry weighs 2^40
  u64 x = u64(fmax(0.0, floor(p.uniform * double(kept))));
  if (x >= kept) x = kept - 1;
  const Pick d = select(src, lim, x, true, false, m, inv_t, sh);
  return find_id(src, d.key, d.index, sh);
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(float* logits, int V, const SampleRow* params, const PenaltyEntry* pen,
                  int32_t* out) {
  __shared__ Smem sh;
  float* row = logits + size_t(blockIdx.x) * V;
  const SampleRow p = params[blockIdx.x];

  // 1. Penalties, in place: each entry is a distinct token. Same arithmetic as the host.
  const bool rep = p.repetition_penalty != 1.0f;
  for (int i = threadIdx.x; i < p.penalty_count; i += kThreads) {
    const PenaltyEntry e = pen[p.penalty_offset + i];
    if (e.token < 0 || e.token >= V) continue;
    float l = row[e.token];
    if (rep) l = l > 0 ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
    if (e.output_count > 0)
      l = __fsub_rn(l, __fmaf_rn(p.frequency_penalty, float(e.output_count), p.presence_penalty));
    row[e.token] = l;
  }
  __syncthreads();

  // 2. The best entry (first maximal id): the argmax, and the reference of the weights.
  float best = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const float v = row[i];
    if (v > best || (v == best && i < bi)) best = v, bi = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
  }
  if ((threadIdx.x & 31) == 0) sh.wbest[threadIdx.x >> 5] = best, sh.wid[threadIdx.x >> 5] = bi;
  __syncthreads();
  best = sh.wbest[0];
  bi = sh.wid[0];
  for (int w = 1; w < kWarps; ++w)
    if (sh.wbest[w] > best || (sh.wbest[w] == best && sh.wid[w] < bi))
      best = sh.wbest[w], bi = sh.wid[w];
  const int argmax = bi == INT_MAX ? 0 : bi;
  const bool greedy = p.temperature < 1e-5f || p.top_k == 1;
  if (greedy || !isfinite(best)) {  // a row without a finite maximum: nothing to weigh
    if (threadIdx.x == 0) out[blockIdx.x] = argmax;
    return;
  }

  // 3. Weights exp((l - m) / T); top-k, then top-p over what top-k kept, then min-p: each
  // keeps a prefix of the order, so the kept set is the tightest of the three cuts.
  const float m = best;
  const double inv_td = 1.0 / double(p.temperature);
  const float inv_t = float(inv_td);
  Cut lim{0u, kAll};
  if (p.top_k == 0 && p.top_p >= 1.0f) {  // no truncation but min-p: the draw goes by id
    const float lt = p.min_p > 0.0f ? min_p_threshold(m, inv_td, p.min_p) : -INFINITY;
    const u64 kept = prefix_mass(RowSrc{row, V}, {key_of(lt), kAll}, m, inv_t, sh);
    u64 x = u64(fmax(0.0, floor(p.uniform * double(kept))));
    if (x >= kept) x = kept - 1;
    const int id = kept > 0 ? draw_by_id(row, V, m, inv_t, lt, x, sh) : -1;
    if (threadIdx.x == 0) out[blockIdx.x] = id >= 0 ? id : argmax;
    return;
  }
  const RowSrc whole{row, V};
  if (p.top_k > 0 && p.top_k < V) {
    const Pick k = select(whole, lim, u64(p.top_k), false, true, m, inv_t, sh);
    lim = {k.key, k.index + 1};
    if (p.top_k <= kCompact) {
      // A small top-k set: the remaining passes read it from shared memory, not the row.
      const int n = compact(row, V, lim, sh);
      __syncthreads();
      const ListSrc list{sh.cval, sh.cid, n};
      const int id = truncate_and_draw(list, {0u, kAll}, p, m, inv_td, inv_t, sh);
      if (threadIdx.x == 0) out[blockIdx.x] = id >= 0 ? id : argmax;
      return;
    }
  }
  const int id = truncate_and_draw(whole, lim, p, m, inv_td, inv_t, sh);
  if (threadIdx.x == 0) out[blockIdx.x] = id >= 0 ? id : argmax;
}

}  // namespace

void sample_rows(float* logits, int rows, int vocab, const SampleRow* params,
                 const PenaltyEntry* penalties, int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return;
  // Fixed-point sums hold vocab * 2^40 in 64 bits.
  if (vocab <= 0 || vocab > (1 << 23))
    cuda_fail("sample_rows", "vocabulary size outside [1, 2^23]", __FILE__, __LINE__);
  sample_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, penalties, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
