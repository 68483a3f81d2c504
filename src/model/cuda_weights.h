#pragma once
// Qwen3 weights in GPU memory, in the layout the CUDA forward uses:
//   qkv     [(Hq + 2 Hkv) hd, hidden]  q_proj, k_proj, v_proj stacked along the output dim
//   gate_up [2 inter, hidden]          gate_proj then up_proj
//   o [hidden, Hq hd], down [hidden, inter], norms [dim]; lm_head aliases embed when tied.
// bf16, or with FP8 weights the four products above as e4m3 codes with 128 x 128 block
// scales (backend/cuda/fp8_weight.h; their bf16 pointers are then null): loaded as they are
// from an FP8 checkpoint, or quantized on the GPU from bf16 (core/fp8.h's rule). Embedding,
// lm_head and norms stay bf16, as in Qwen3's FP8 checkpoints.
// Only built with CUDA (include from files guarded by TANDEM_HAVE_CUDA).
#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/fp8_weight.h"
#include "model/config.h"

namespace tandem::model {

struct CudaLayerWeights {
  __nv_bfloat16 *in_norm = nullptr, *qkv = nullptr, *q_norm = nullptr, *k_norm = nullptr,
                *o = nullptr, *post_norm = nullptr, *gate_up = nullptr, *down = nullptr;
  cuda::Fp8Weight qkv8, o8, gate_up8, down8;  // FP8 weights only
};

class CudaWeights {
 public:
  // Bytes the weights of `c` take on the GPU (the embedding once when tied).
  static uint64_t bytes_needed(const ModelConfig& c, bool fp8 = false);
  // FP8 weights need every product's dims in whole 128-blocks (all Qwen3 sizes are); throws
  // kUnsupported naming the first that is not.
  static void check_fp8_shapes(const ModelConfig& c);
  // Random weights of the config's shapes, generated on the GPU from `seed`; with fp8 the
  // same bf16 draws, quantized.
  static CudaWeights synthetic(const ModelConfig& c, uint64_t seed, bool fp8 = false);
  // A Hugging Face checkpoint folder (bf16, f32, or Qwen3 FP8), copied to the GPU through
  // pinned staging buffers; `progress` logs the share copied. fp8: keep or make FP8 weights
  // (an FP8 checkpoint needs it).
  static CudaWeights from_checkpoint(const std::string& dir, const ModelConfig& c, bool progress,
                                     bool fp8 = false);

  CudaWeights() = default;
  CudaWeights(CudaWeights&& o) noexcept { *this = std::move(o); }
  CudaWeights& operator=(CudaWeights&& o) noexcept;
  ~CudaWeights();

  __nv_bfloat16 *embed = nullptr, *lm_head = nullptr, *final_norm = nullptr;
  std::vector<CudaLayerWeights> layers;
  uint64_t bytes = 0;
  bool fp8 = false;

 private:
  void* alloc_bytes(size_t bytes);
  __nv_bfloat16* alloc(size_t elems) { return static_cast<__nv_bfloat16*>(alloc_bytes(elems * 2)); }
  cuda::Fp8Weight alloc_fp8(size_t N, size_t K);
  void allocate(const ModelConfig& c, bool fp8);
  std::vector<void*> allocs_;
};

}  // namespace tandem::model
