#pragma once
// Row-wise argmax of fp32 logits on the GPU, so greedy steps return token ids instead of
// vocabulary-wide rows (152k floats per row) to the host.
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// logits: [rows, vocab] fp32, row-major. out[r] = the first index of the largest value of
// row r (ties go to the smaller id, as the host sampler does; NaN never wins).
void argmax_rows(const float* logits, int rows, int vocab, int32_t* out, cudaStream_t stream);

}  // namespace tandem::cuda
