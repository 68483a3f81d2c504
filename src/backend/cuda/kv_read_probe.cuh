#pragma once
// A yardstick for decode attention: reads exactly the K/V bytes decode attention reads (each
// KV head of each sequence's context, through the block tables) and does nothing else, so its
// rate is what a pure streaming reader reaches on the paged layout. Tests and benchmarks
// compare the attention kernel's rate with it.
#include <cuda_runtime.h>

#include "backend/cuda/decode_attention.cuh"

namespace tandem::cuda {

// out: S * Hkv floats (a checksum per block, so the reads cannot be dropped).
void kv_read_probe(PagedKv kv, int S, int Hkv, int hd, float* out, cudaStream_t stream);

}  // namespace tandem::cuda
