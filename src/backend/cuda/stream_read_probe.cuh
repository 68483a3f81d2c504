#pragma once
// A yardstick for the products that stream weights: reads a byte range once, 16 bytes a
// load, and only folds it into a checksum, so its time is what a pure streaming reader takes
// over the same bytes. Timing a decode layer's kernels' bytes as one read and as one read a
// kernel measures what the boundaries between the kernels cost by themselves.
#include <cuda_runtime.h>

#include <cstddef>

namespace tandem::cuda {

// How the reader is launched.
enum class ReadLaunch {
  kPlain,  // an ordinary launch, four blocks an SM
  // Programmatic dependent launch where enabled: its blocks may be placed while the previous
  // kernel finishes, its reads still wait for that kernel (as a product's reads of its input
  // must), and it lets the next kernel's blocks in once all of its blocks are past their reads.
  kPdl,
  // PDL with two blocks an SM (room for the next kernel's beside them): each block's first
  // round of loads goes out before the wait (as a product's weight loads can), and the next
  // kernel's blocks may be placed once every block is in its last round.
  kPdlEarly,
  kPlainHalf,  // an ordinary launch with kPdlEarly's two blocks an SM, to compare it with
};

// XORs every 32-bit word of [p, p + bytes) into *out (atomically; *out is not cleared).
// bytes % 16 == 0 and p 16-byte aligned.
void stream_read_probe(const void* p, size_t bytes, unsigned* out, cudaStream_t stream,
                       ReadLaunch how = ReadLaunch::kPlain);

}  // namespace tandem::cuda
