#pragma once
// Decode attention over the paged KV cache: one query row per sequence, split-K
// (flash-decoding). Each block reads one KV head's keys and values of one split of one
// sequence's context once, for the whole group of Hq/Hkv query heads that share it (GQA).
//
//   q:   row s at q + s * q_stride, heads [Hq, hd] (the q part of the fused qkv row)
//   cache (one layer): [slots, Hkv, hd]; block_tables [S, max_blocks]; ctx_lens [S]
//   out: row s at out + s * out_stride, [Hq, hd] bf16
// The query of sequence s sits at position ctx_lens[s] - 1 and attends to every cached token
// (its own K/V already written). ctx_lens[s] == 0 (a padding row) gives a zero output.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// One layer's cache. bf16 (k_scale null): k and v are [slots, Hkv, hd] bf16. FP8
// (k_scale set): k and v are [slots, Hkv, hd] e4m3 codes and k_scale, v_scale [slots, Hkv]
// fp32, each vector reading back as bf16(code * scale) (kv_fp8.cuh).
struct PagedKv {
  const void* k;
  const void* v;
  const int32_t* block_tables;  // [S, max_blocks]
  int max_blocks;
  const int32_t* ctx_lens;  // [S]
  int block_size;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t slots = 0;  // slots in k and v (blocks x block_size); 0: not told (TMA needs it)
  bool fp8() const { return k_scale != nullptr; }
};

// fp32 floats of scratch `decode_attention` needs for S sequences and `splits` splits.
size_t decode_attention_workspace(int S, int Hq, int hd, int splits);

// A split count that fills the GPU for S sequences (graph-safe: independent of the lengths).
int decode_attention_splits(int S, int Hkv, int num_sms);

// Which kernel runs: tensor cores (mma.sync, head_dim 64/128) where the shape allows, in its
// wide (4 warps a block) or narrow (2 warps) shape, or the CUDA-core kernel for every shape.
// Tests and A/B runs force one; TANDEM_DECODE_ATTN=portable|wide|narrow sets it at start-up.
enum class DecodeKernel { kAuto, kPortable, kWide, kNarrow };
void set_decode_attention_kernel(DecodeKernel k);
// The tensor-core kernel's two shapes (decode_attention_mma.cu): kWide 4 warps a block, 2
// blocks an SM; kNarrow 2 warps, 4 blocks an SM. Over an FP8 cache (fp8,
// decode_attention_mma_f8.cu) wide runs 3 blocks an SM and narrow 5 (head_dim 128). kAuto
// takes pick_decode_mma's choice for a grid of `items` (sequences x KV heads) x `splits`
// blocks on `num_sms` multiprocessors.
enum class DecodeMma { kWide, kNarrow };
DecodeMma pick_decode_mma(int items, int splits, int num_sms, bool fp8 = false);

// hd in {16, 32, 64, 128, 256}; Hq / Hkv <= 8. workspace: decode_attention_workspace floats,
// zero-filled once after allocation (it holds split counters that every call leaves at zero).
void decode_attention(const __nv_bfloat16* q, int q_stride, PagedKv kv, __nv_bfloat16* out,
                      int out_stride, int S, int Hq, int Hkv, int hd, float scale, int splits,
                      float* workspace, cudaStream_t stream);

}  // namespace tandem::cuda
