#pragma once
// An FP8 weight on the GPU: [N, K] e4m3 codes (HF's [out, in] layout) and one fp32 scale per
// 128 x 128 block, s[(n / 128) * lds + k / 128], lds = ceil(K / 128) rounded up to a
// multiple of 4 (core/fp8.h: fp8_scale_stride), the layout the block-scaled GEMM reads.
#include <cstdint>

namespace tandem::cuda {

struct Fp8Weight {
  const uint8_t* q = nullptr;
  const float* s = nullptr;
  int lds = 0;
  explicit operator bool() const { return q != nullptr; }
};

}  // namespace tandem::cuda
