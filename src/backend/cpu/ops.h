#pragma once
// The CPU reference kernels of a Qwen3 layer, fp32 activations and accumulation. Shapes in
// the comments: T new tokens, H hidden, D head_dim, Hq/Hkv query/KV heads.
#include <cstdint>
#include <span>

#include "backend/cpu/gemm.h"
#include "backend/cpu/thread_pool.h"

namespace tandem::cpu {

// out[t, :] = table[ids[t], :] widened to fp32. table: [V, H].
void embedding(std::span<const int32_t> ids, const WeightRef& table, float* out);

// RMSNorm over each of `rows` rows of length d (stride ld, in place allowed):
// y = x * rsqrt(mean(x^2) + eps) * weight. weight: [d].
void rmsnorm(const float* x, int64_t rows, int64_t d, int64_t ld, const WeightRef& weight,
             double eps, float* y, int64_t ldy);

// Rotary embedding, NeoX half-split, in place on x: [T, heads, D] with row stride ld per
// token. inv_freq: [D/2]; scale multiplies cos and sin (YaRN's attention factor; 1 plain).
void rope(float* x, int64_t t, int64_t heads, int64_t d, int64_t ld,
          std::span<const int32_t> positions, std::span<const float> inv_freq, float scale);

// out = silu(gate) * up over [T, I]; gate_up rows hold gate then up (row stride 2I).
void silu_mul(const float* gate_up, int64_t t, int64_t inter, float* out);

// Paged K/V cache of one layer: [num_blocks, block_size, Hkv, D] fp32. fp8: the cache holds
// the values an FP8 cache reads back (core/fp8.h: each (token, head) vector quantized to
// e4m3 codes with its own scale), kept as floats.
struct PagedKv {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0, block_size = 16, kv_heads = 0, head_dim = 0;
  bool fp8 = false;
  int64_t slot_floats() const { return kv_heads * head_dim; }
};

// Writes each new token's K and V ([T, Hkv*D], row strides ldk/ldv) to its slot.
void kv_store(const PagedKv& kv, const float* k, int64_t ldk, const float* v, int64_t ldv,
              std::span<const int64_t> slots);

// Causal attention of new tokens against the paged cache. q: [T, Hq, D] (row stride ldq),
// out: [T, Hq, D] (stride ldo). Token row r of sequence s attends to cache positions
// 0..positions[r] through block table row s. scale: usually D^-0.5.
struct AttnBatch {
  std::span<const int32_t> positions;     // [T]
  std::span<const int32_t> query_start;   // [S+1]
  std::span<const int32_t> block_tables;  // [S * max_blocks]
  int32_t max_blocks = 0;
};
void attention(const float* q, int64_t ldq, int64_t q_heads, const PagedKv& kv, const AttnBatch& b,
               float scale, float* out, int64_t ldo, ThreadPool& pool);

}  // namespace tandem::cpu
