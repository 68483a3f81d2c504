// Decode (split-K) and prefill (tensor-core, causal) attention over a paged KV cache with
// shuffled block tables, against a double-precision CPU loop.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/kv_read_probe.cuh"
#include "backend/cuda/prefill_attention.cuh"
#include "backend/cuda/qk_norm_rope.cuh"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// A paged cache holding S sequences of random K/V, their blocks scattered at random.
struct PagedCase {
  int S, Hq, Hkv, hd, block_size, max_blocks, num_blocks;
  std::vector<int32_t> ctx, block_tables;
  std::vector<float> k, v;  // [num_blocks * block_size, Hkv, hd]

  PagedCase(Rng& rng, std::vector<int32_t> ctx_lens, int Hq_, int Hkv_, int hd_, int bs)
      : S(int(ctx_lens.size())), Hq(Hq_), Hkv(Hkv_), hd(hd_), block_size(bs), ctx(ctx_lens) {
    max_blocks = 1;
    int total = 0;
    for (int c : ctx) {
      max_blocks = std::max(max_blocks, (c + bs - 1) / bs);
      total += (c + bs - 1) / bs;
    }
    num_blocks = total + 3;
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = num_blocks - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
    block_tables.assign(size_t(S) * max_blocks, -1);
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (ctx[s] + bs - 1) / bs; ++b)
        block_tables[size_t(s) * max_blocks + b] = perm[next++];
    k = random_bf16(rng, size_t(num_blocks) * bs * Hkv * hd);
    v = random_bf16(rng, size_t(num_blocks) * bs * Hkv * hd);
  }
  // The cache in FP8 (core/fp8.h): e4m3 codes and a scale per (slot, head). k and v become
  // the values the portable and prefill kernels read back, bf16(code * scale); the originals
  // are returned, and code * scale unrounded (k_exact, v_exact): what the tensor-core decode
  // kernel computes with (exact fp16 codes, the scales applied in fp32).
  struct Fp8 {
    std::vector<uint8_t> kq, vq;
    std::vector<float> ks, vs, k_orig, v_orig, k_exact, v_exact;
  };
  Fp8 to_fp8(Rng& rng) {
    Fp8 f;
    const size_t vecs = k.size() / size_t(hd);
    // Vectors of very different sizes (2^-8 .. 2^4), as real K and V heads have: each gets
    // its own scale.
    for (size_t i = 0; i < vecs; ++i) {
      const float mk = std::ldexp(1.0f, int(rng.next() % 13) - 8);
      const float mv = std::ldexp(1.0f, int(rng.next() % 13) - 8);
      for (int d = 0; d < hd; ++d) {
        k[i * hd + d] = round_bf16(k[i * hd + d] * mk);
        v[i * hd + d] = round_bf16(v[i * hd + d] * mv);
      }
    }
    f.k_orig = k;
    f.v_orig = v;
    f.kq.resize(k.size());
    f.vq.resize(v.size());
    f.ks.resize(vecs);
    f.vs.resize(vecs);
    f.k_exact.resize(k.size());
    f.v_exact.resize(v.size());
    for (size_t i = 0; i < vecs; ++i) {
      f.ks[i] = kv_fp8_quantize(k.data() + i * hd, hd, f.kq.data() + i * hd);
      f.vs[i] = kv_fp8_quantize(v.data() + i * hd, hd, f.vq.data() + i * hd);
      for (int d = 0; d < hd; ++d) {
        f.k_exact[i * hd + d] = fp8_e4m3_to_float(f.kq[i * hd + d]) * f.ks[i];
        f.v_exact[i * hd + d] = fp8_e4m3_to_float(f.vq[i * hd + d]) * f.vs[i];
        k[i * hd + d] = round_bf16(f.k_exact[i * hd + d]);
        v[i * hd + d] = round_bf16(f.v_exact[i * hd + d]);
      }
    }
    return f;
  }
  const float* kv_at(const std::vector<float>& c, int s, int tok, int kvh) const {
    const int64_t slot =
        int64_t(block_tables[size_t(s) * max_blocks + tok / block_size]) * block_size +
        tok % block_size;
    return c.data() + (size_t(slot) * Hkv + kvh) * hd;
  }
  // softmax(q k^T / sqrt(hd)) v over keys [0, upto] of sequence s, head h.
  void ref(const float* q, int s, int h, int upto, double* out) const {
    const int kvh = h / (Hq / Hkv);
    std::vector<double> sc(upto + 1);
    double mx = -1e300;
    for (int j = 0; j <= upto; ++j) {
      const float* kr = kv_at(k, s, j, kvh);
      double d = 0;
      for (int i = 0; i < hd; ++i) d += double(q[i]) * kr[i];
      sc[j] = d / std::sqrt(double(hd));
      mx = std::max(mx, sc[j]);
    }
    double l = 0;
    for (auto& x : sc) l += (x = std::exp(x - mx));
    for (int i = 0; i < hd; ++i) out[i] = 0;
    for (int j = 0; j <= upto; ++j) {
      const float* vr = kv_at(v, s, j, kvh);
      for (int i = 0; i < hd; ++i) out[i] += sc[j] / l * vr[i];
    }
  }
};

struct DecodeShape {
  int Hq, Hkv, hd, bs;
};

// Every kernel: tensor cores (head_dim 64/128) in both shapes, and the CUDA-core one every
// shape can use.
class DecodeAttention : public ::testing::TestWithParam<DecodeKernel> {
 protected:
  void SetUp() override { set_decode_attention_kernel(GetParam()); }
  void TearDown() override { set_decode_attention_kernel(DecodeKernel::kAuto); }
};

// Each kernel against the double-precision loop, on a bf16 cache or (fp8) an FP8 one: there
// the reference reads the values the format holds as the kernel does (bf16(code * scale) for
// the portable kernel, code * scale unrounded for the tensor-core one: on K vectors of
// magnitude ~16 the bf16 rounding alone moves softmax outputs by ~1%, 1.02e-2 with
// TANDEM_TEST_SEED=19299), and must also stay near the result on the unquantized values.
void check_decode(bool fp8, DecodeKernel kind) {
  Rng rng(test_seed() + (fp8 ? 13 : 11));
  for (DecodeShape sh :
       {DecodeShape{10, 2, 128, 16}, DecodeShape{4, 2, 16, 16}, DecodeShape{8, 1, 64, 32},
        DecodeShape{16, 2, 128, 16}, DecodeShape{40, 8, 128, 32}, DecodeShape{7, 7, 64, 16}}) {
    std::vector<int32_t> ctx = {1, 17, 300, 1029, 64, 5, 2500, 65, 63};
    ctx.push_back(0);  // a padding row of a decode graph: zero output
    PagedCase pc(rng, ctx, sh.Hq, sh.Hkv, sh.hd, sh.bs);
    PagedCase::Fp8 f8;
    if (fp8) f8 = pc.to_fp8(rng);
    const bool tensor_cores =
        kind != DecodeKernel::kPortable && (sh.hd == 64 || sh.hd == 128) && sh.Hq / sh.Hkv <= 8;
    PagedCase read = pc;  // the values the kernel computes with
    if (fp8 && tensor_cores) {
      read.k = f8.k_exact;
      read.v = f8.v_exact;
    }
    const int S = pc.S, qstride = (sh.Hq + 2 * sh.Hkv) * sh.hd + 8, ostride = sh.Hq * sh.hd + 24;
    auto q = random_bf16(rng, size_t(S) * qstride);
    Dev<bf16_t> dq(q), dk(fp8 ? 0 : pc.k.size()), dv(fp8 ? 0 : pc.v.size()),
        dout(size_t(S) * ostride);
    if (!fp8) {
      dk.upload(pc.k);
      dv.upload(pc.v);
    }
    Dev<uint8_t> dkq(f8.kq), dvq(f8.vq);
    Dev<float> dks(f8.ks), dvs(f8.vs);
    Dev<int32_t> dbt(pc.block_tables), dctx(pc.ctx);
    for (int splits : {1, 3, decode_attention_splits(S, sh.Hkv, 132)}) {
      Dev<float> ws(decode_attention_workspace(S, sh.Hq, sh.hd, splits));
      TANDEM_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size() * sizeof(float)));
      PagedKv kv{dk.get(), dv.get(), dbt.get(), pc.max_blocks, dctx.get(), sh.bs};
      if (fp8)
        kv = {dkq.get(),  dvq.get(), dbt.get(), pc.max_blocks,
              dctx.get(), sh.bs,     dks.get(), dvs.get()};
      // Twice: split counters must be back at zero after a call (graph replays rely on it).
      decode_attention(dq.get(), qstride, kv, dout.get(), ostride, S, sh.Hq, sh.Hkv, sh.hd,
                       1.0f / std::sqrt(float(sh.hd)), splits, ws.get(), nullptr);
      const auto first = dout.floats();
      TANDEM_CUDA_CHECK(cudaMemset(dout.get(), 0xff, size_t(S) * ostride * sizeof(bf16_t)));
      decode_attention(dq.get(), qstride, kv, dout.get(), ostride, S, sh.Hq, sh.Hkv, sh.hd,
                       1.0f / std::sqrt(float(sh.hd)), splits, ws.get(), nullptr);
      auto out = dout.floats();
      for (int s = 0; s < S; ++s)
        for (int i = 0; i < sh.Hq * sh.hd; ++i)
          ASSERT_EQ(out[size_t(s) * ostride + i], first[size_t(s) * ostride + i])
              << "second call differs: seq " << s << " splits " << splits;
      std::vector<float> got;
      std::vector<double> ref;
      for (int s = 0; s < S; ++s)
        for (int h = 0; h < sh.Hq; ++h) {
          std::vector<double> r(sh.hd, 0.0);
          if (pc.ctx[s] > 0)
            read.ref(q.data() + size_t(s) * qstride + h * sh.hd, s, h, pc.ctx[s] - 1, r.data());
          for (int i = 0; i < sh.hd; ++i) {
            got.push_back(out[size_t(s) * ostride + h * sh.hd + i]);
            ref.push_back(r[i]);
          }
        }
      EXPECT_LT(rel_error(got, ref), 1e-2)
          << "hd " << sh.hd << " G " << sh.Hq / sh.Hkv << " splits " << splits << " fp8 " << fp8;
      // The unquantized cache's answer, loosely: e4m3 keeps 3 mantissa bits, and on random
      // data the outputs move by up to about 10% (0.102 seen with TANDEM_TEST_SEED=30218).
      if (fp8) {
        PagedCase orig = pc;
        orig.k = f8.k_orig;
        orig.v = f8.v_orig;
        std::vector<double> ref0;
        for (int s = 0; s < S; ++s)
          for (int h = 0; h < sh.Hq; ++h) {
            std::vector<double> r(sh.hd, 0.0);
            if (pc.ctx[s] > 0)
              orig.ref(q.data() + size_t(s) * qstride + h * sh.hd, s, h, pc.ctx[s] - 1, r.data());
            ref0.insert(ref0.end(), r.begin(), r.end());
          }
        EXPECT_LT(rel_error(got, ref0), 0.15) << "hd " << sh.hd << " splits " << splits;
      }
      for (int i = 0; i < sh.Hq * sh.hd; ++i)
        ASSERT_EQ(out[size_t(S - 1) * ostride + i], 0.0f) << "padding row";
    }
  }
}

TEST_P(DecodeAttention, MatchesCpu) {
  check_decode(false, GetParam());
}

TEST_P(DecodeAttention, Fp8MatchesCpu) {
  check_decode(true, GetParam());
}

INSTANTIATE_TEST_SUITE_P(CudaKernels, DecodeAttention,
                         ::testing::Values(DecodeKernel::kAuto, DecodeKernel::kWide,
                                           DecodeKernel::kNarrow, DecodeKernel::kPortable),
                         [](const auto& info) -> std::string {
                           switch (info.param) {
                             case DecodeKernel::kAuto:
                               return "Auto";
                             case DecodeKernel::kWide:
                               return "TensorCoresWide";
                             case DecodeKernel::kNarrow:
                               return "TensorCoresNarrow";
                             default:
                               return "Portable";
                           }
                         });

// Decode attention right behind the kernel that writes the step's new keys (qk_norm_rope, as
// in the model): on sm_90 it is launched with PDL and copies the tiles cached before the step
// while that kernel still runs, so the new key's slot, poisoned with NaN beforehand, must
// only be read after the wait. Contexts put the new key in the first tile, the second, and
// late; one and several splits; both shapes; bf16 and FP8 caches; repeated, since a wrong
// order would only show when the race is lost.
TEST(CudaKernels, DecodeAttentionAfterTheKvWriter) {
  Rng rng(test_seed() + 17);
  const int Hq = 40, Hkv = 8, hd = 128, bs = 16, row = (Hq + 2 * Hkv) * hd;
  const std::vector<int32_t> ctx = {1, 2, 31, 33, 64, 65, 97, 300, 529, 1029};
  const int S = int(ctx.size());
  std::vector<float> inv(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / hd));
  auto qw = random_bf16(rng, hd, 0.2, 1.0), kw = random_bf16(rng, hd, 0.2, 1.0);
  Dev<bf16_t> dqw(qw), dkw(kw);
  Dev<float> dinv(inv);
  cudaStream_t st;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (bool fp8 : {false, true})
    for (DecodeKernel kind : {DecodeKernel::kWide, DecodeKernel::kNarrow}) {
      set_decode_attention_kernel(kind);
      PagedCase pc(rng, ctx, Hq, Hkv, hd, bs);
      PagedCase::Fp8 f8;
      if (fp8) f8 = pc.to_fp8(rng);
      std::vector<int64_t> slot(S);
      std::vector<int32_t> pos(S);
      for (int s = 0; s < S; ++s) {
        pos[s] = ctx[s] - 1;
        slot[s] =
            int64_t(pc.block_tables[size_t(s) * pc.max_blocks + pos[s] / bs]) * bs + pos[s] % bs;
      }
      // The new keys' slots hold NaN until the writer runs (FP8: NaN codes and scales).
      auto k0 = pc.k, v0 = pc.v;
      auto kq0 = f8.kq, vq0 = f8.vq;
      auto ks0 = f8.ks, vs0 = f8.vs;
      for (int s = 0; s < S; ++s)
        for (int g = 0; g < Hkv; ++g) {
          const size_t r = size_t(slot[s]) * Hkv + g;
          for (int i = 0; i < hd; ++i) {
            k0[r * hd + i] = v0[r * hd + i] = NAN;
            if (fp8) kq0[r * hd + i] = vq0[r * hd + i] = 0x7f;
          }
          if (fp8) ks0[r] = vs0[r] = NAN;
        }
      Dev<bf16_t> dk(fp8 ? 0 : k0.size()), dv(fp8 ? 0 : v0.size()), dqkv(size_t(S) * row),
          dout(size_t(S) * Hq * hd);
      Dev<uint8_t> dkq(kq0.size()), dvq(vq0.size());
      Dev<float> dks(ks0.size()), dvs(vs0.size());
      Dev<int32_t> dbt(pc.block_tables), dctx(pc.ctx), dpos(pos);
      Dev<int64_t> dslot(slot);
      for (int splits : {1, 3}) {
        Dev<float> ws(decode_attention_workspace(S, Hq, hd, splits));
        TANDEM_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size() * sizeof(float)));
        for (int rep = 0; rep < 8; ++rep) {
          const auto qkv = random_bf16(rng, size_t(S) * row, 1.5);
          dqkv.upload(qkv);
          if (fp8) {
            dkq.upload(kq0), dvq.upload(vq0), dks.upload(ks0), dvs.upload(vs0);
          } else {
            dk.upload(k0), dv.upload(v0);
          }
          const KvDest dest = fp8 ? KvDest{dslot.get(), dkq.get(), dvq.get(), dks.get(), dvs.get()}
                                  : KvDest{dslot.get(), dk.get(), dv.get()};
          PagedKv kv{dk.get(), dv.get(), dbt.get(), pc.max_blocks, dctx.get(), bs};
          if (fp8)
            kv = {dkq.get(),  dvq.get(), dbt.get(), pc.max_blocks,
                  dctx.get(), bs,        dks.get(), dvs.get()};
          qk_norm_rope(dqkv.get(), dpos.get(), dqw.get(), dkw.get(), RopeArgs{dinv.get(), 1.0f}, S,
                       Hq, Hkv, hd, 1e-6f, st, dest);
          decode_attention(dqkv.get(), row, kv, dout.get(), Hq * hd, S, Hq, Hkv, hd,
                           1.0f / std::sqrt(float(hd)), splits, ws.get(), st);
          TANDEM_CUDA_CHECK(cudaStreamSynchronize(st));
          // The reference reads the cache as the writer left it.
          PagedCase now = pc;
          const auto q = dqkv.floats();
          if (fp8) {
            std::vector<uint8_t> kq(kq0.size()), vq(vq0.size());
            TANDEM_CUDA_CHECK(cudaMemcpy(kq.data(), dkq.get(), kq.size(), cudaMemcpyDeviceToHost));
            TANDEM_CUDA_CHECK(cudaMemcpy(vq.data(), dvq.get(), vq.size(), cudaMemcpyDeviceToHost));
            const auto ks = dks.floats(), vs = dvs.floats();
            for (size_t i = 0; i < now.k.size(); ++i) {  // as the tensor-core kernel reads it
              now.k[i] = fp8_e4m3_to_float(kq[i]) * ks[i / hd];
              now.v[i] = fp8_e4m3_to_float(vq[i]) * vs[i / hd];
            }
          } else {
            now.k = dk.floats();
            now.v = dv.floats();
          }
          const auto out = dout.floats();
          std::vector<double> ref;
          for (int s = 0; s < S; ++s)
            for (int h = 0; h < Hq; ++h) {
              std::vector<double> r(hd);
              now.ref(q.data() + size_t(s) * row + h * hd, s, h, ctx[s] - 1, r.data());
              ref.insert(ref.end(), r.begin(), r.end());
            }
          ASSERT_LT(rel_error(out, ref), 1e-2) << (fp8 ? "fp8" : "bf16") << " cache, "
                                               << (kind == DecodeKernel::kWide ? "wide" : "narrow")
                                               << ", splits " << splits << ", repeat " << rep;
        }
      }
    }
  set_decode_attention_kernel(DecodeKernel::kAuto);
  TANDEM_CUDA_CHECK(cudaStreamDestroy(st));
}

// The automatic shape on a 132-SM H200 at Qwen3-14B's 8 KV heads (the runner's split counts):
// wide for split grids, while one wide wave holds the grid, or where narrow waves would run
// emptier; narrow otherwise.
TEST(CudaKernels, DecodeAttentionShapeChoice) {
  auto pick = [](int S) { return pick_decode_mma(8 * S, decode_attention_splits(S, 8, 132), 132); };
  EXPECT_EQ(pick(1), DecodeMma::kWide);   // 16 splits
  EXPECT_EQ(pick(16), DecodeMma::kWide);  // 2 splits
  EXPECT_EQ(pick(32), DecodeMma::kWide);  // one split, 256 blocks: one wide wave
  EXPECT_EQ(pick(33), DecodeMma::kWide);  // 264 blocks
  EXPECT_EQ(pick(48), DecodeMma::kNarrow);
  EXPECT_EQ(pick(64), DecodeMma::kNarrow);  // 1 narrow wave, 2 wide
  EXPECT_EQ(pick(80), DecodeMma::kWide);
  EXPECT_EQ(pick(96), DecodeMma::kWide);     // 1.45 narrow waves
  EXPECT_EQ(pick(128), DecodeMma::kNarrow);  // 128, 256: full waves
  EXPECT_EQ(pick(256), DecodeMma::kNarrow);
  // FP8 cache (3 wide or 5 narrow blocks an SM): wide while one wide wave holds the grid,
  // then the better-filled waves.
  auto pick8 = [](int S) {
    return pick_decode_mma(8 * S, decode_attention_splits(S, 8, 132), 132, true);
  };
  EXPECT_EQ(pick8(1), DecodeMma::kWide);     // 128 blocks: one wide wave
  EXPECT_EQ(pick8(8), DecodeMma::kWide);     // 192 blocks
  EXPECT_EQ(pick8(32), DecodeMma::kWide);    // 256 blocks (one split)
  EXPECT_EQ(pick8(64), DecodeMma::kNarrow);  // 512 blocks
  EXPECT_EQ(pick8(96), DecodeMma::kWide);    // 768: 0.97 against 0.58
  EXPECT_EQ(pick8(128), DecodeMma::kWide);   // 1,024: 0.86 against 0.78
  EXPECT_EQ(pick8(256), DecodeMma::kWide);   // 2,048: 0.86 against 0.78
}

struct PrefillDims {
  int Hq, Hkv, hd, bs;
};

// Timing of decode attention at Qwen3-14B's heads (40 q, 8 KV, hd 128, 16-token blocks
// scattered at random) for engine-sized batches, beside the rate a pure streaming reader
// reaches on the same bytes (kv_read_probe). Two sequences are checked against the CPU.
// TANDEM_TIMING_BATCH=S times that batch alone (for profiling one launch).
TEST(CudaKernels, DecodeAttentionTiming) {
  Rng rng(test_seed() + 12);
  constexpr int Hq = 40, Hkv = 8, hd = 128, bs = 16;
  const char* only = std::getenv("TANDEM_TIMING_BATCH");
  for (int S : {1, 8, 32, 64, 96, 128, 256}) {
    if (only && S != std::atoi(only)) continue;
    for (bool spread : {false, true}) {
      if (spread && (only || (S != 64 && S != 256))) continue;
      std::vector<int32_t> ctx(size_t(S), 528);
      if (spread)  // 400..655, as in a running engine
        for (int s = 0; s < S; ++s) ctx[size_t(s)] = 400 + (s * 37) % 256;
      PagedCase pc(rng, ctx, Hq, Hkv, hd, bs);
      const int qstride = (Hq + 2 * Hkv) * hd, ostride = Hq * hd;
      auto q = random_bf16(rng, size_t(S) * qstride);
      Dev<bf16_t> dq(q), dk(pc.k), dv(pc.v), dout(size_t(S) * ostride);
      Dev<int32_t> dbt(pc.block_tables), dctx(pc.ctx);
      Dev<float> probe(size_t(S) * Hkv);
      const int auto_splits = decode_attention_splits(S, Hkv, 132);
      int splits = auto_splits;
      Dev<float> ws(decode_attention_workspace(S, Hq, hd, 8));
      TANDEM_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size() * sizeof(float)));
      PagedKv kv{dk.get(), dv.get(), dbt.get(), pc.max_blocks, dctx.get(), bs};
      const float scale = 1.0f / std::sqrt(float(hd));
      auto attend = [&] {
        decode_attention(dq.get(), qstride, kv, dout.get(), ostride, S, Hq, Hkv, hd, scale, splits,
                         ws.get(), nullptr);
      };
      attend();
      const auto out = dout.floats();
      for (int s : {0, S - 1}) {
        std::vector<float> got;
        std::vector<double> ref;
        for (int h = 0; h < Hq; ++h) {
          std::vector<double> r(hd, 0.0);
          pc.ref(q.data() + size_t(s) * qstride + h * hd, s, h, pc.ctx[size_t(s)] - 1, r.data());
          for (int i = 0; i < hd; ++i) {
            got.push_back(out[size_t(s) * ostride + h * hd + i]);
            ref.push_back(r[i]);
          }
        }
        EXPECT_LT(rel_error(got, ref), 1e-2) << "S " << S << " seq " << s;
      }
      double bytes = 0;
      for (int c : ctx) bytes += 2.0 * c * Hkv * hd * sizeof(bf16_t);
      const double t_probe =
          time_us([&] { kv_read_probe(kv, S, Hkv, hd, probe.get(), nullptr); }, 20);
      double t_auto[2] = {0, 0};  // wide, narrow at the automatic split count
      for (DecodeKernel k : {DecodeKernel::kWide, DecodeKernel::kNarrow}) {
        set_decode_attention_kernel(k);
        for (int sp : {auto_splits, 2}) {
          if (sp != auto_splits && sp <= auto_splits) continue;
          splits = sp;
          const double t_attn = time_us(attend, 20);
          if (sp == auto_splits) t_auto[k == DecodeKernel::kNarrow] = t_attn;
          std::printf(
              "[ perf ] decode attention %s S=%d ctx %s, %d split(s)%s: %.1f us, %.2f "
              "TB/s; streaming read of the same bytes %.1f us, %.2f TB/s (attention at "
              "%.2f of it)\n",
              k == DecodeKernel::kWide ? "wide" : "narrow", S, spread ? "400-655" : "528", sp,
              sp == auto_splits ? " (auto)" : "", t_attn, bytes / t_attn * 1e-6, t_probe,
              bytes / t_probe * 1e-6, t_probe / t_attn);
        }
      }
      {  // the same lengths in an FP8 cache: codes and a scale per vector
        auto f8 = pc.to_fp8(rng);
        Dev<uint8_t> dkq(f8.kq), dvq(f8.vq);
        Dev<float> dks(f8.ks), dvs(f8.vs);
        kv = {dkq.get(), dvq.get(), dbt.get(), pc.max_blocks, dctx.get(), bs, dks.get(), dvs.get()};
        double bytes8 = 0;
        for (int c : ctx) bytes8 += 2.0 * c * Hkv * (hd + 4);
        splits = auto_splits;
        for (DecodeKernel k : {DecodeKernel::kWide, DecodeKernel::kNarrow}) {
          set_decode_attention_kernel(k);
          const double t8 = time_us(attend, 20);
          std::printf(
              "[ perf ] decode attention fp8 %s S=%d ctx %s: %.1f us, %.2f TB/s; "
              "%.2fx the bf16 cache's time\n",
              k == DecodeKernel::kWide ? "wide" : "narrow", S, spread ? "400-655" : "528", t8,
              bytes8 / t8 * 1e-6, t8 / t_auto[k == DecodeKernel::kNarrow]);
        }
        kv = {dk.get(), dv.get(), dbt.get(), pc.max_blocks, dctx.get(), bs};
      }
      set_decode_attention_kernel(DecodeKernel::kAuto);
    }
  }
}

TEST(CudaKernels, PrefillAttentionMatchesCpu) {
  Rng rng(test_seed() + 12);
  for (PrefillDims sh :
       {PrefillDims{10, 2, 128, 16}, PrefillDims{4, 2, 16, 16}, PrefillDims{6, 3, 64, 32}}) {
    // New rows per sequence and the cached prefix before them (chunked prefill / prefix
    // hits), including single-row decodes in the same batch.
    const std::vector<int> qlen = {1, 37, 130, 64, 1, 200};
    const std::vector<int> prefix = {40, 0, 17, 100, 0, 333};
    std::vector<int32_t> ctx, qstart = {0}, pos;
    for (size_t s = 0; s < qlen.size(); ++s) {
      ctx.push_back(prefix[s] + qlen[s]);
      for (int i = 0; i < qlen[s]; ++i) pos.push_back(prefix[s] + i);
      qstart.push_back(qstart.back() + qlen[s]);
    }
    PagedCase pc(rng, ctx, sh.Hq, sh.Hkv, sh.hd, sh.bs);
    const int T = qstart.back(), qstride = (sh.Hq + 2 * sh.Hkv) * sh.hd, ostride = sh.Hq * sh.hd;
    auto q = random_bf16(rng, size_t(T) * qstride);
    auto tiles = make_prefill_tiles(qstart.data(), pos.data(), pc.S);
    Dev<bf16_t> dq(q), dk(pc.k), dv(pc.v), dout(size_t(T) * ostride);
    Dev<int32_t> dbt(pc.block_tables), dctx(pc.ctx), dpos(pos), dtiles(tiles);
    PagedKv kv{dk.get(), dv.get(), dbt.get(), pc.max_blocks, dctx.get(), sh.bs};
    std::vector<double> ref(size_t(T) * ostride);
    for (int s = 0; s < pc.S; ++s)
      for (int t = qstart[s]; t < qstart[s + 1]; ++t)
        for (int h = 0; h < sh.Hq; ++h)
          pc.ref(q.data() + size_t(t) * qstride + h * sh.hd, s, h, pos[t],
                 ref.data() + size_t(t) * ostride + h * sh.hd);
    for (int shape = 0; shape <= int(PrefillShape::kW8R32); ++shape) {  // auto, then each
      TANDEM_CUDA_CHECK(cudaMemset(dout.get(), 0xff, dout.size() * sizeof(bf16_t)));
      prefill_attention(dq.get(), qstride, dpos.get(), dtiles.get(), int(tiles.size() / 4), kv,
                        dout.get(), ostride, sh.Hq, sh.Hkv, sh.hd, 1.0f / std::sqrt(float(sh.hd)),
                        nullptr, PrefillShape(shape));
      auto out = dout.floats();
      EXPECT_LT(rel_error(out, ref), 1e-2) << "hd " << sh.hd << " shape " << shape;
      EXPECT_LT(max_abs_error(out, ref), 0.05) << "hd " << sh.hd << " shape " << shape;
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
