#pragma once
// Token sampling on the GPU: penalties, temperature, top-k, top-p, min-p and one given
// uniform draw per row, with the same rules and the same total order as the host sampler
// (src/engine/sampler.cpp), so only one token id per row leaves the device.
//
// One block per row, no sort: every truncation of the host sampler keeps a prefix of the
// candidates in the order "larger logit first, then smaller id". Each prefix is found by
// radix selection over the order-preserving 32-bit key of the logits (digits of 12, 12 and
// 8 bits, one pass over the row each), histogramming counts (top-k) or probability mass
// (top-p, the draw); a run of equal logits is resolved arithmetically (equal weights) and
// the chosen member is the i-th smallest id of that value (one more pass). Without top-k
// and top-p the host walks the tokens by increasing id instead (min-p only zeroes weights),
// and so does this: one prefix-sum pass in id order.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/sampling_knobs.h"

namespace tandem::cuda {

// temperature below 1e-5 (or top_k 1): argmax, the first maximal id.
struct SampleRow : SamplingKnobs {
  int32_t penalty_offset = 0, penalty_count = 0;  // entries of `penalties` for this row
  double uniform = 0.0;                           // the draw, in [0, 1)
};

// One distinct token of a row's penalty window. The repetition penalty applies to every
// entry (when it is not 1); presence and frequency to entries with output_count > 0.
struct PenaltyEntry {
  int32_t token;
  int32_t output_count;  // occurrences in the output part of the window
};

// logits: [rows, vocab] fp32, modified in place (penalties). params: [rows] on the device;
// penalties: the entries all rows point into (device; may be null when no row has any).
// out[r]: the token of row r.
void sample_rows(float* logits, int rows, int vocab, const SampleRow* params,
                 const PenaltyEntry* penalties, int32_t* out, cudaStream_t stream);

}  // namespace tandem::cuda
