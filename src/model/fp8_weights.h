#pragma once
// Block-scaled FP8 linear weights of Qwen3-*-FP8 checkpoints, read on the host. Each such
// weight is stored as `<name>` F8_E4M3 [N, K] (codes) plus `<name>_scale_inv`
// [ceil(N / bn), ceil(K / bk)] (bn x bk = quantization_config's weight_block_size, 128 x 128)
// in BF16, F16 or F32, read from the header. Despite the name the scale multiplies:
//   W[i, j] = e4m3(codes[i, j]) * scale[i / bn][j / bk].
// An e4m3 value (4 significant bits) times a bf16 (8) or f16 (11) scale is exact in fp32;
// an f32 scale gives the fp32 product rounded once, as torch computes it.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace tandem::cpu {
class ThreadPool;
}

namespace tandem::model {

struct Fp8Weight {
  const uint8_t* codes = nullptr;  // [n, k] e4m3 codes, row-major, inside the mapped file
  std::vector<float> scales;       // [ceil(n / block_n), ceil(k / block_k)], widened to fp32
  int64_t n = 0, k = 0;
  int block_n = 128, block_k = 128;
  int64_t scale_cols() const { return (k + block_k - 1) / block_k; }
};

// The name of a weight's scale tensor: "<name>_scale_inv".
std::string fp8_scale_name(const std::string& weight_name);

// Reads an F8_E4M3 weight of shape [n, k] and its scale tensor. Errors name the tensor:
// kNotFound for a missing weight, kInvalidArgument for a missing scale tensor or a wrong
// shape, kUnsupported for a dtype other than F8_E4M3 (weight) or BF16/F16/F32 (scale).
Fp8Weight read_fp8_weight(const Checkpoint& ckpt, const std::string& name, int64_t n, int64_t k,
                          const Fp8Quantization& q);

// out[i * k + j] = e4m3(codes[i, j]) * scale[i / block_n][j / block_k], rows split over
// `pool` when given.
void dequantize_fp8_weight(const Fp8Weight& w, float* out, cpu::ThreadPool* pool = nullptr);

}  // namespace tandem::model
