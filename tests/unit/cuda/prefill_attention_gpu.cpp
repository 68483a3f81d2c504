// Prefill attention (causal, paged KV cache) on the cases the runner sends: long prompts,
// chunks continuing a cached prefix, GQA groups 1 to 8, block sizes 16 and 32, odd row counts,
// mixed batches; every block shape and the automatic choice, against a
// double-precision CPU loop. The same cases with an FP8 cache (core/fp8.h), against the loop
// on the values the cache reads back. Plus a timing of long prompts (printed, checked on
// sampled rows).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

#include "backend/cuda/prefill_attention.cuh"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// Sequences with a cached prefix and new query rows, their K/V blocks scattered at random.
struct PrefillBatch {
  int S, Hq, Hkv, hd, bs, max_blocks = 1, num_blocks = 0, T = 0, qstride, ostride;
  std::vector<int32_t> ctx, qstart = {0}, pos, seq_of_row, block_tables;
  std::vector<float> k, v, q;  // cache [num_blocks * bs, Hkv, hd]; q rows [T, qstride]

  // fast: uniform bf16 values in [-2, 2) (quick to draw for the big timing cases) instead
  // of normal ones scaled by q_std.
  // q_pad: elements after the fused qkv row (not a multiple of 8: rows not 16-byte aligned).
  PrefillBatch(Rng& rng, const std::vector<int>& prefix, const std::vector<int>& qlen, int Hq_,
               int Hkv_, int hd_, int bs_, double q_std, bool fast = false, int q_pad = 8)
      : S(int(qlen.size())), Hq(Hq_), Hkv(Hkv_), hd(hd_), bs(bs_) {
    for (int s = 0; s < S; ++s) {
      ctx.push_back(prefix[size_t(s)] + qlen[size_t(s)]);
      for (int i = 0; i < qlen[size_t(s)]; ++i) {
        pos.push_back(prefix[size_t(s)] + i);
        seq_of_row.push_back(s);
      }
      qstart.push_back(qstart.back() + qlen[size_t(s)]);
      max_blocks = std::max(max_blocks, (ctx.back() + bs - 1) / bs);
      num_blocks += (ctx.back() + bs - 1) / bs;
    }
    T = qstart.back();
    num_blocks += 3;
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = num_blocks - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[rng.next() % (i + 1)]);
    block_tables.assign(size_t(S) * max_blocks, -1);
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (ctx[size_t(s)] + bs - 1) / bs; ++b)
        block_tables[size_t(s) * max_blocks + b] = perm[size_t(next++)];
    qstride = (Hq + 2 * Hkv) * hd + q_pad;  // the fused qkv row, padded
    ostride = Hq * hd + 24;
    const size_t kv_n = size_t(num_blocks) * bs * Hkv * hd, q_n = size_t(T) * qstride;
    if (fast) {
      auto fill = [&](std::vector<float>& x, size_t n) {
        x.resize(n);
        for (auto& e : x) e = round_bf16(float(4.0 * rng.uniform() - 2.0));
      };
      fill(k, kv_n);
      fill(v, kv_n);
      fill(q, q_n);
    } else {
      k = random_bf16(rng, kv_n);
      v = random_bf16(rng, kv_n);
      q = random_bf16(rng, q_n, q_std);
    }
  }
  const float* kv_at(const std::vector<float>& c, int s, int tok, int kvh) const {
    const int64_t slot = int64_t(block_tables[size_t(s) * max_blocks + tok / bs]) * bs + tok % bs;
    return c.data() + (size_t(slot) * Hkv + kvh) * hd;
  }
  // softmax(q k^T / sqrt(hd)) v of query row t, head h, over keys [0, pos[t]], with the
  // cache values kc, vc (laid out as k, v).
  void ref(int t, int h, double* out, const std::vector<float>& kc,
           const std::vector<float>& vc) const {
    const int s = seq_of_row[size_t(t)], upto = pos[size_t(t)], kvh = h / (Hq / Hkv);
    const float* qr = q.data() + size_t(t) * qstride + size_t(h) * hd;
    std::vector<double> sc(size_t(upto) + 1);
    double mx = -1e300;
    for (int j = 0; j <= upto; ++j) {
      const float* kr = kv_at(kc, s, j, kvh);
      double d = 0;
      for (int i = 0; i < hd; ++i) d += double(qr[i]) * kr[i];
      sc[size_t(j)] = d / std::sqrt(double(hd));
      mx = std::max(mx, sc[size_t(j)]);
    }
    double l = 0;
    for (auto& x : sc) l += (x = std::exp(x - mx));
    for (int i = 0; i < hd; ++i) out[i] = 0;
    for (int j = 0; j <= upto; ++j) {
      const float* vr = kv_at(vc, s, j, kvh);
      for (int i = 0; i < hd; ++i) out[i] += sc[size_t(j)] / l * vr[i];
    }
  }
};

// Every (token, KV head) vector of the cache scaled by its own power of two (K by 2^0..2^-2,
// V by 2^0..2^-3; values stay bf16) and about 1 in 64 zeroed: the FP8 scales then differ
// from key to key, so a scale applied to the wrong key shows, and all-zero vectors (scale 0)
// occur. Kept <= 1 so the outputs stay within the absolute bound of check().
void vary_magnitudes(PrefillBatch& b, Rng& rng) {
  for (size_t row = 0; row < b.k.size() / size_t(b.hd); ++row) {
    const bool zero = rng.next() % 64 == 0;
    const float fk = zero ? 0.0f : std::ldexp(1.0f, -int(rng.next() % 3));
    const float fv = zero ? 0.0f : std::ldexp(1.0f, -int(rng.next() % 4));
    for (int i = 0; i < b.hd; ++i) {
      b.k[row * size_t(b.hd) + i] *= fk;
      b.v[row * size_t(b.hd) + i] *= fv;
    }
  }
}

// The batch's cache in the FP8 format: each (slot, head) vector a sequence uses quantized by
// kv_fp8_quantize; the slots no sequence uses (block tails, spare blocks) poisoned with NaN
// codes (0xff) and NaN scales, so reading one shows in the output. kd, vd: the values the
// kernel reads back, bf16(e4m3(q) * s), laid out as b.k and b.v (0 in unused slots).
struct Fp8Cache {
  std::vector<uint8_t> k, v;
  std::vector<float> k_scale, v_scale, kd, vd;
  explicit Fp8Cache(const PrefillBatch& b) {
    const size_t rows = b.k.size() / size_t(b.hd);
    float nan;
    const uint32_t poison = 0xffffffffu;
    std::memcpy(&nan, &poison, sizeof nan);
    k.assign(b.k.size(), 0xff);
    v = k;
    k_scale.assign(rows, nan);
    v_scale = k_scale;
    kd.assign(b.k.size(), 0.0f);
    vd = kd;
    for (int s = 0; s < b.S; ++s)
      for (int tok = 0; tok < b.ctx[size_t(s)]; ++tok)
        for (int h = 0; h < b.Hkv; ++h) {
          const size_t row = size_t(b.kv_at(b.k, s, tok, h) - b.k.data()) / size_t(b.hd);
          quantize(b.k, row, b.hd, k, k_scale, kd);
          quantize(b.v, row, b.hd, v, v_scale, vd);
        }
  }
  static void quantize(const std::vector<float>& x, size_t row, int hd, std::vector<uint8_t>& codes,
                       std::vector<float>& scales, std::vector<float>& back) {
    const size_t o = row * size_t(hd);
    scales[row] = kv_fp8_quantize(x.data() + o, hd, codes.data() + o);
    for (int i = 0; i < hd; ++i)
      back[o + size_t(i)] = round_bf16(fp8_e4m3_to_float(codes[o + size_t(i)]) * scales[row]);
  }
};

// The batch uploaded once (with an FP8 cache: its codes and scales instead of b.k, b.v);
// run() launches the kernel into a poisoned output.
struct DeviceBatch {
  const PrefillBatch& b;
  std::vector<int32_t> tiles;
  Dev<bf16_t> dq, dk, dv, dout;
  Dev<int32_t> dbt, dctx, dpos, dtiles;
  std::unique_ptr<Dev<uint8_t>> dk8, dv8;
  std::unique_ptr<Dev<float>> dks, dvs;
  explicit DeviceBatch(const PrefillBatch& pb, const Fp8Cache* f8 = nullptr)
      : b(pb),
        tiles(make_prefill_tiles(pb.qstart.data(), pb.pos.data(), pb.S)),
        dq(pb.q),
        dk(pb.k),
        dv(pb.v),
        dout(size_t(pb.T) * pb.ostride),
        dbt(pb.block_tables),
        dctx(pb.ctx),
        dpos(pb.pos),
        dtiles(tiles) {
    if (f8) {
      dk8 = std::make_unique<Dev<uint8_t>>(f8->k);
      dv8 = std::make_unique<Dev<uint8_t>>(f8->v);
      dks = std::make_unique<Dev<float>>(f8->k_scale);
      dvs = std::make_unique<Dev<float>>(f8->v_scale);
    }
  }
  void launch(PrefillShape shape, cudaStream_t stream = nullptr) {
    PagedKv kv{dk.get(), dv.get(), dbt.get(), b.max_blocks, dctx.get(), b.bs};
    kv.slots = int64_t(b.num_blocks) * b.bs;
    if (dk8) {
      kv.k = dk8->get();
      kv.v = dv8->get();
      kv.k_scale = dks->get();
      kv.v_scale = dvs->get();
    }
    prefill_attention(dq.get(), b.qstride, dpos.get(), dtiles.get(), int(tiles.size() / 4), kv,
                      dout.get(), b.ostride, b.Hq, b.Hkv, b.hd, 1.0f / std::sqrt(float(b.hd)),
                      stream, shape);
  }
  std::vector<float> run(PrefillShape shape) {
    TANDEM_CUDA_CHECK(cudaMemset(dout.get(), 0xff, dout.size() * sizeof(bf16_t)));  // NaN
    launch(shape);
    return dout.floats();
  }
};

// The reference outputs of some rows (all heads), computed once per batch, with the batch's
// cache values or others laid out as them (an FP8 cache's read-back values).
struct Reference {
  std::vector<int> rows;
  std::vector<double> values;  // [rows, Hq, hd]
  Reference(const PrefillBatch& b, std::vector<int> rows_) : Reference(b, rows_, b.k, b.v) {}
  Reference(const PrefillBatch& b, std::vector<int> rows_, const std::vector<float>& kc,
            const std::vector<float>& vc)
      : rows(std::move(rows_)) {
    values.resize(rows.size() * size_t(b.Hq) * b.hd);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int h = 0; h < b.Hq; ++h)
        b.ref(rows[i], h, values.data() + (i * b.Hq + h) * size_t(b.hd), kc, vc);
  }
};

// Every output value of every row written and finite; the reference rows compared.
void check(const PrefillBatch& b, const std::vector<float>& out, const Reference& ref,
           const std::string& what) {
  for (int t = 0; t < b.T; ++t)
    for (int i = 0; i < b.Hq * b.hd; ++i)
      ASSERT_TRUE(std::isfinite(out[size_t(t) * b.ostride + i]))
          << what << ": row " << t << " value " << i << " not written";
  std::vector<float> got;
  double worst = 0;
  int worst_row = -1;
  for (size_t r = 0; r < ref.rows.size(); ++r)
    for (int i = 0; i < b.Hq * b.hd; ++i) {
      const float g = out[size_t(ref.rows[r]) * b.ostride + i];
      got.push_back(g);
      const double e = std::fabs(g - ref.values[r * size_t(b.Hq) * b.hd + i]);
      if (e > worst) {
        worst = e;
        worst_row = ref.rows[r];
      }
    }
  EXPECT_LT(rel_error(got, ref.values), 1e-2) << what;
  EXPECT_LT(worst, 0.05) << what << ": worst row " << worst_row << " (position "
                         << (worst_row >= 0 ? b.pos[size_t(worst_row)] : -1) << ")";
}

std::vector<int> all_rows(const PrefillBatch& b) {
  std::vector<int> r(size_t(b.T));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// kWgmma runs the warpgroup-MMA kernel where it fits (sm_90a, hd 128, aligned q rows; with an
// FP8 cache 4 or 8 KV heads) and the automatic choice elsewhere.
const PrefillShape kShapes[] = {PrefillShape::kW4R16, PrefillShape::kW8R16, PrefillShape::kW4R32,
                                PrefillShape::kW8R32, PrefillShape::kWgmma, PrefillShape::kAuto};
std::string shape_name(PrefillShape s) {
  const char* names[] = {
      "auto", "4 warps x 16 rows", "8 warps x 16 rows", "4 warps x 32 rows", "8 warps x 32 rows",
      "wgmma"};
  return names[int(s)];
}

struct Case {
  const char* name;
  std::vector<int> prefix, qlen;
  int Hq, Hkv, hd, bs;
  double q_std;
  int q_pad = 8;
};

std::vector<Case> prefill_cases() {
  return {
      // Odd row counts around the tile sizes, with and without a cached prefix, G = 5.
      {"odd rows G5 hd128 bs32", {0, 7, 300, 0, 64}, {1, 63, 65, 129, 200}, 10, 2, 128, 32, 2.5},
      {"odd rows G5 hd128 bs16", {5, 0, 1000}, {129, 1, 63}, 5, 1, 128, 16, 1.0},
      // A chunk continuing a cached prefix: positions 1234..1999 of a 2000-token context.
      {"prefix 1234 G8 hd64 bs32", {1234, 0, 5}, {766, 1, 129}, 8, 1, 64, 32, 1.0},
      {"prefix 1234 G5 hd128 bs16", {1234, 31}, {766, 65}, 10, 2, 128, 16, 2.0},
      {"G8 hd64 bs16", {100, 3, 0}, {65, 1, 129}, 16, 2, 64, 16, 1.5},
      {"G4 hd128 bs16", {0, 17}, {257, 3}, 8, 2, 128, 16, 1.0},
      {"G2 hd128 bs32", {40, 0}, {130, 37}, 4, 2, 128, 32, 1.0},
      {"G1 hd32 bs16", {9, 0}, {70, 200}, 3, 3, 32, 16, 1.0},
      {"G2 hd16 bs32", {0, 333}, {129, 64}, 4, 2, 16, 32, 1.0},
      // Qwen3's 8 KV heads (and 4): the FP8 cache's scale rows fit the wgmma kernel's copies.
      {"G5 Hkv8 hd128 bs16", {0, 300, 17}, {129, 77, 200}, 40, 8, 128, 16, 1.0},
      {"G4 Hkv4 hd128 bs32", {1000, 0}, {65, 190}, 16, 4, 128, 32, 1.5},
      {"G5 Hkv8 hd128 bs64", {70, 0}, {3, 140}, 40, 8, 128, 64, 1.0},
      // q rows only 4-byte aligned: the 32-row shapes fall back to registers-only loads.
      {"unaligned q G5 hd128", {3, 0}, {131, 64}, 10, 2, 128, 16, 1.0, 2},
  };
}

TEST(CudaKernels, PrefillAttentionCases) {
  const uint64_t seed = test_seed();
  const std::vector<Case> cases = prefill_cases();
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    Rng rng(seed + 100 + c);
    PrefillBatch b(rng, cs.prefix, cs.qlen, cs.Hq, cs.Hkv, cs.hd, cs.bs, cs.q_std, false, cs.q_pad);
    DeviceBatch d(b);
    const Reference ref(b, all_rows(b));
    for (PrefillShape shape : kShapes)
      check(b, d.run(shape), ref, std::string(cs.name) + ", " + shape_name(shape));
  }
}

// The cases with an FP8 cache (per-vector magnitudes varied, unused slots poisoned): against
// the reference on the values the cache reads back, as tight as the bf16 cases, and near
// the bf16 kernel on the unquantized values (e4m3 keeps 3 mantissa bits: a few percent).
TEST(CudaKernels, PrefillAttentionFp8Cases) {
  const uint64_t seed = test_seed();
  const std::vector<Case> cases = prefill_cases();
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    Rng rng(seed + 100 + c);  // the data of PrefillAttentionCases, then the magnitudes
    PrefillBatch b(rng, cs.prefix, cs.qlen, cs.Hq, cs.Hkv, cs.hd, cs.bs, cs.q_std, false, cs.q_pad);
    vary_magnitudes(b, rng);
    const Fp8Cache f8(b);
    DeviceBatch d(b, &f8);
    const Reference ref(b, all_rows(b), f8.kd, f8.vd);
    // The bf16 kernel on the unquantized values, rows packed [T, Hq * hd].
    auto packed = [&](const std::vector<float>& out) {
      std::vector<float> r;
      for (int t = 0; t < b.T; ++t)
        r.insert(r.end(), out.begin() + ptrdiff_t(t) * b.ostride,
                 out.begin() + ptrdiff_t(t) * b.ostride + b.Hq * b.hd);
      return r;
    };
    const std::vector<float> base_f = packed(DeviceBatch(b).run(PrefillShape::kAuto));
    const std::vector<double> base(base_f.begin(), base_f.end());
    for (PrefillShape shape : kShapes) {
      const std::string what = std::string(cs.name) + ", " + shape_name(shape) + ", fp8";
      const std::vector<float> out = d.run(shape);
      check(b, out, ref, what);
      EXPECT_LT(rel_error(packed(out), base), 0.1) << what << ": far from the bf16 cache";
    }
  }
}

// One 3001-token prompt (3001 keys for the last row): every row written, a sample compared.
TEST(CudaKernels, PrefillAttentionLongContext) {
  Rng rng(test_seed() + 200);
  PrefillBatch b(rng, {0}, {3001}, 10, 2, 128, 16, 1.5);
  std::vector<int> rows;
  for (int t = 0; t < b.T; ++t)
    if (t < 140 || t >= b.T - 140 || t % 37 == 0) rows.push_back(t);
  DeviceBatch d(b);
  const Reference ref(b, rows);
  for (PrefillShape shape : kShapes) check(b, d.run(shape), ref, "3001 keys, " + shape_name(shape));
}

TEST(CudaKernels, PrefillAttentionRejectsBadInput) {
  Rng rng(test_seed() + 300);
  PrefillBatch b(rng, {0}, {10}, 4, 2, 64, 16, 1.0);
  DeviceBatch d(b);
  PagedKv kv{d.dk.get(), d.dv.get(), d.dbt.get(), b.max_blocks, d.dctx.get(), b.bs};
  auto call = [&](int Hq, int Hkv, int hd, int shape) {
    prefill_attention(d.dq.get(), b.qstride, d.dpos.get(), d.dtiles.get(), int(d.tiles.size() / 4),
                      kv, d.dout.get(), b.ostride, Hq, Hkv, hd, 0.125f, nullptr,
                      PrefillShape(shape));
  };
  EXPECT_ANY_THROW(call(4, 2, 96, 0));  // head_dim
  EXPECT_ANY_THROW(call(5, 2, 64, 0));  // Hq % Hkv
  EXPECT_ANY_THROW(call(4, 2, 64, 7));  // block shape
  EXPECT_ANY_THROW(call(4, 2, 64, -1));
  EXPECT_NO_THROW(call(4, 2, 64, 0));
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
}

// Timing of Qwen3-14B-shaped attention (40 q heads, 8 KV heads, hd 128): an 8192-token prompt
// and the last 8192-token chunk of a 16384-token one. Prints ms and TFLOP/s (causal FLOPs:
// 4 hd per (query, key, head)) for each block shape, with the bf16 and the FP8 cache;
// sampled rows are checked.
TEST(CudaKernels, PrefillAttentionTiming) {
  Rng rng(test_seed() + 400);
  for (int prefix : {0, 8192}) {
    PrefillBatch b(rng, {prefix}, {8192}, 40, 8, 128, 16, 1.0, /*fast=*/true);
    const Fp8Cache f8(b);
    DeviceBatch d16(b), d8(b, &f8);
    double flops = 0;
    for (int p : b.pos) flops += 4.0 * b.hd * b.Hq * (p + 1);
    std::vector<int> rows = {0, 1, 127, 128, 4095, 4096, b.T - 129, b.T - 128, b.T - 1};
    for (int i = 0; i < 4; ++i) rows.push_back(int(rng.next() % uint64_t(b.T)));
    const Reference ref16(b, rows), ref8(b, rows, f8.kd, f8.vd);
    cudaEvent_t e0, e1;
    TANDEM_CUDA_CHECK(cudaEventCreate(&e0));
    TANDEM_CUDA_CHECK(cudaEventCreate(&e1));
    for (bool fp8 : {false, true}) {
      for (PrefillShape shape : kShapes) {
        DeviceBatch& d = fp8 ? d8 : d16;
        const std::string what = "ctx " + std::to_string(b.ctx[0]) + ", " + shape_name(shape) +
                                 (fp8 ? ", fp8 cache" : "");
        check(b, d.run(shape), fp8 ? ref8 : ref16, what);
        constexpr int kReps = 5;
        TANDEM_CUDA_CHECK(cudaEventRecord(e0));
        for (int i = 0; i < kReps; ++i) d.launch(shape);
        TANDEM_CUDA_CHECK(cudaEventRecord(e1));
        TANDEM_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        ms /= kReps;
        std::printf("[ perf ] prefill attention %d rows, %s: %.3f ms, %.1f TFLOP/s\n", b.T,
                    what.c_str(), ms, flops / (ms * 1e-3) / 1e12);
      }
    }
    TANDEM_CUDA_CHECK(cudaEventDestroy(e0));
    TANDEM_CUDA_CHECK(cudaEventDestroy(e1));
  }
}

}  // namespace
}  // namespace tandem::cuda::test
