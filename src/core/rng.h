#pragma once
// A portable random generator: the same seed gives the same numbers on every machine and
// compiler. std:: distributions are not portable, and libm's log/cos may differ in the last
// bit between C libraries, so normal() uses only additions (Irwin-Hall: the sum of 12
// uniforms minus 6 has mean 0, variance 1, and is bounded by +-6, which suits weights).
#include <cstdint>

namespace tandem {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    // Seed xoshiro256** through splitmix64, as its authors recommend.
    uint64_t x = seed;
    for (auto& w : s_) {
      x += 0x9e3779b97f4a7c15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }

  // Approximately standard normal; exact same value on every IEEE-754 machine.
  double normal() {
    double s = 0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6.0;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace tandem
