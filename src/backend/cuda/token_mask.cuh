#pragma once
// Token masks of constrained decoding (src/structured) applied to logits on the GPU, before
// the argmax or the sampler reads them: an entry the mask does not allow becomes -inf, so
// every sampler setting (penalties, temperature, top-k/p, min-p) picks among allowed tokens.
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// logits: [rows, vocab] fp32. mask_of_row[r]: row r's mask in `masks` ([*, words] uint32,
// bit t % 32 of word t / 32 allows token t), or -1 for none. All on the device.
void apply_token_masks(float* logits, int rows, int vocab, const uint32_t* masks, int words,
                       const int32_t* mask_of_row, cudaStream_t stream);

}  // namespace tandem::cuda
