#pragma once
// bfloat16 storage type: the top 16 bits of an IEEE float. Conversion from float rounds to
// nearest even (as torch does), NaN stays NaN.
#include <cstdint>
#include <cstring>

namespace tandem {

struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_float(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

// Round a float through bf16 and back: what a bf16 tensor stores.
inline float round_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
}

}  // namespace tandem
