#include "backend/cuda/check.cuh"
#include "backend/cuda/token_mask.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

// grid (ceil(words / kThreads), rows): one thread per 32-token word of a row.
__global__ void token_mask_kernel(float* logits, int vocab, const uint32_t* masks, int words,
                                  const int32_t* mask_of_row) {
  const int r = blockIdx.y;
  const int m = mask_of_row[r];
  const int w = blockIdx.x * kThreads + threadIdx.x;
  if (m < 0 || w >= words) return;
  const uint32_t bits = masks[size_t(m) * words + w];
  if (bits == 0xffffffffu) return;
  float* row = logits + size_t(r) * vocab;
  const int end = min(vocab, (w + 1) * 32);
  for (int t = w * 32; t < end; ++t)
    if (!((bits >> (t & 31)) & 1u)) row[t] = -INFINITY;
}

}  // namespace

void apply_token_masks(float* logits, int rows, int vocab, const uint32_t* masks, int words,
                       const int32_t* mask_of_row, cudaStream_t stream) {
  if (rows <= 0) return;
  dim3 grid((words + kThreads - 1) / kThreads, rows);
  token_mask_kernel<<<grid, kThreads, 0, stream>>>(logits, vocab, masks, words, mask_of_row);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
