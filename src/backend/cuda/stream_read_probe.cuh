#pragma once
// A yardstick for the products that stream weights: reads a byte range once, 16 bytes a
// load, and only folds it into a checksum, so its time is what a pure streaming reader takes
// over the same bytes. Timing a decode layer's kernels' bytes as one read and as one read a
// kernel measures what the boundaries between the kernels cost by themselves.
#include <cuda_runtime.h>

#include <cstddef>

namespace tandem::cuda {

// XORs every 32-bit word of [p, p + bytes) into *out (atomically; *out is not cleared).
// bytes % 16 == 0 and p 16-byte aligned. `pdl`: launched with programmatic dependent launch
// where enabled, so its blocks may be placed while the previous kernel finishes (the reads
// still wait for it, as a product's reads of its input must); it lets the next kernel's
// blocks be placed once all of its blocks are past their reads.
void stream_read_probe(const void* p, size_t bytes, unsigned* out, cudaStream_t stream,
                       bool pdl = false);

}  // namespace tandem::cuda
