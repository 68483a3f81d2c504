#pragma once
// Row gather: the embedding lookup, and the selection of the rows whose logits are wanted.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// out[i, :] = table[rows[i], :] for i < n.  table [*, dim], out [n, dim], bf16 row-major,
// dim % 8 == 0. Row ids are trusted (the runner validates them on the host).
void gather_rows(const int32_t* rows, const __nv_bfloat16* table, __nv_bfloat16* out, int n,
                 int dim, cudaStream_t stream);

}  // namespace tandem::cuda
