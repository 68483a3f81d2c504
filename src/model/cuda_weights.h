#pragma once
// Qwen3 weights in GPU memory, bf16, in the layout the CUDA forward uses:
//   qkv     [(Hq + 2 Hkv) hd, hidden]  q_proj, k_proj, v_proj stacked along the output dim
//   gate_up [2 inter, hidden]          gate_proj then up_proj
//   o [hidden, Hq hd], down [hidden, inter], norms [dim]; lm_head aliases embed when tied.
// Only built with CUDA (include from files guarded by TANDEM_HAVE_CUDA).
#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace tandem::model {

struct CudaLayerWeights {
  __nv_bfloat16 *in_norm, *qkv, *q_norm, *k_norm, *o, *post_norm, *gate_up, *down;
};

class CudaWeights {
 public:
  // Bytes the weights of `c` take on the GPU (the embedding once when tied).
  static uint64_t bytes_needed(const ModelConfig& c);
  // Random weights of the config's shapes, generated on the GPU from `seed`.
  static CudaWeights synthetic(const ModelConfig& c, uint64_t seed);
  // A bf16 (or f16/f32, converted) Hugging Face checkpoint folder, copied to the GPU through
  // pinned staging buffers; `progress` logs the share copied.
  static CudaWeights from_checkpoint(const std::string& dir, const ModelConfig& c, bool progress);

  CudaWeights() = default;
  CudaWeights(CudaWeights&& o) noexcept { *this = std::move(o); }
  CudaWeights& operator=(CudaWeights&& o) noexcept;
  ~CudaWeights();

  __nv_bfloat16 *embed = nullptr, *lm_head = nullptr, *final_norm = nullptr;
  std::vector<CudaLayerWeights> layers;
  uint64_t bytes = 0;

 private:
  __nv_bfloat16* alloc(size_t elems);
  void allocate(const ModelConfig& c);
  std::vector<void*> allocs_;
};

}  // namespace tandem::model
