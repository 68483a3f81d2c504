// The device FP8 (e4m3) KV codec (kv_fp8.cuh, through the kv_fp8_check hooks) against the
// host one (core/fp8.h) bit for bit: the host reference of every FP8 cache test relies on it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/kv_fp8_check.cuh"
#include "core/fp8.h"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(KvFp8Codec, DeviceDecodesEveryCodeAsHost) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = uint8_t(c);
  // s = 1 widens exactly (bf16 holds every e4m3 value); an odd s exercises bf16(q * s).
  for (float s : {1.0f, 0.0137f, 3.0e-5f}) {
    std::vector<float> h(256), b(256);
    kv_fp8_check_decode(codes.data(), codes.size(), s, h.data(), b.data());
    for (int c = 0; c < 256; ++c) {
      const float want = fp8_e4m3_to_float(uint8_t(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(c == 0x7f || c == 0xff) << c;
        EXPECT_TRUE(std::isnan(h[c])) << c;
        EXPECT_TRUE(std::isnan(b[c])) << c;
        continue;
      }
      EXPECT_EQ(bits(h[c]), bits(want)) << "code " << c << ": " << h[c] << " vs " << want;
      EXPECT_EQ(bits(b[c]), bits(round_bf16(want * s))) << "code " << c << ", s " << s;
    }
  }
}

// Adds x and its neighbours one float step away.
void with_neighbours(std::vector<float>& v, float x) {
  v.push_back(x);
  v.push_back(std::nextafter(x, INFINITY));
  v.push_back(std::nextafter(x, -INFINITY));
}

TEST(KvFp8Codec, DeviceEncodesAsHost) {
  Rng rng(test_seed() + 101);
  std::vector<float> x;
  // Every code's value, the exact ties half-way between neighbouring codes (round to even
  // decides), and the float steps around both, with either sign.
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = fp8_e4m3_to_float(uint8_t(c)), hi = fp8_e4m3_to_float(uint8_t(c + 1));
    for (float sg : {1.0f, -1.0f}) {
      with_neighbours(x, sg * lo);
      with_neighbours(x, sg * (lo + hi) / 2);  // exact in fp32
    }
  }
  // Around and past the largest finite value: 464 is the tie with the (absent) next step.
  for (float a : {448.0f, 456.0f, 464.0f, 480.0f, 500.0f, 1e4f, 1e30f, 3.4e38f})
    for (float sg : {1.0f, -1.0f}) with_neighbours(x, sg * a);
  // Zeros, fp32 subnormals and the e4m3 subnormal range (steps of 2^-9 below 2^-6).
  for (float a :
       {0.0f, 1e-45f, 1e-40f, 1.17e-38f, 1e-6f, 0x1p-11f, 0x1p-10f, 0x1p-9f, 0x1p-7f, 0x1p-6f})
    for (float sg : {1.0f, -1.0f}) with_neighbours(x, sg * a);
  const size_t fixed = x.size();
  // ~1M random values: magnitudes log-uniform over 2^-14 .. 2^10, uniform over +-470, and
  // arbitrary finite bit patterns.
  while (x.size() < fixed + (1u << 20)) {
    const uint64_t r = rng.next();
    const float sg = (r & 1) ? -1.0f : 1.0f;
    switch ((r >> 1) % 3) {
      case 0:
        x.push_back(sg * float(std::exp2(-14.0 + 24.0 * rng.uniform())));
        break;
      case 1:
        x.push_back(float(-470.0 + 940.0 * rng.uniform()));
        break;
      default: {
        const float f = from_bits(uint32_t(r >> 32));
        if (std::isfinite(f)) x.push_back(f);
      }
    }
  }
  std::vector<float> ones(x.size(), 1.0f);
  std::vector<uint8_t> q(x.size());
  kv_fp8_check_encode(x.data(), ones.data(), x.size(), q.data());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (q[i] != float_to_fp8_e4m3(x[i]) && ++bad <= 20)
      ADD_FAILURE() << "x = " << x[i] << " (0x" << std::hex << bits(x[i]) << "): device 0x"
                    << int(q[i]) << ", host 0x" << int(float_to_fp8_e4m3(x[i])) << std::dec;
  EXPECT_EQ(bad, 0u);

  // The product inside kv_fp8_encode (x * inv, rounded once) is the host's x * inv.
  std::vector<float> inv(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = round_bf16(float(rng.normal() * std::exp2(-8.0 + 16.0 * rng.uniform())));
    inv[i] = float(std::exp2(-10.0 + 20.0 * rng.uniform()));
  }
  kv_fp8_check_encode(x.data(), inv.data(), x.size(), q.data());
  bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (q[i] != float_to_fp8_e4m3(x[i] * inv[i]) && ++bad <= 20)
      ADD_FAILURE() << "x = " << x[i] << ", inv = " << inv[i] << ": device 0x" << std::hex
                    << int(q[i]) << ", host 0x" << int(float_to_fp8_e4m3(x[i] * inv[i]))
                    << std::dec;
  EXPECT_EQ(bad, 0u);

  // NaN stays NaN (the sign of a NaN code is not part of the contract).
  const float nan_in[2] = {NAN, -NAN}, one[2] = {1.0f, 1.0f};
  uint8_t nan_q[2];
  kv_fp8_check_encode(nan_in, one, 2, nan_q);
  for (uint8_t c : nan_q) EXPECT_EQ(c & 0x7f, 0x7f) << int(c);
}

// kv_fp8_quantize's two divisions, and the whole rule over random vectors: the device
// scales and codes equal the host's.
TEST(KvFp8Codec, DeviceScalesAndVectorsAsHost) {
  Rng rng(test_seed() + 102);
  std::vector<float> amax = {0.0f, 1.0f, 448.0f, 1e-30f, 1e-40f, 3.0e38f};
  while (amax.size() < 100000) amax.push_back(float(std::exp2(-40.0 + 80.0 * rng.uniform())));
  std::vector<float> inv(amax.size()), scale(amax.size());
  kv_fp8_check_scales(amax.data(), amax.size(), inv.data(), scale.data());
  for (size_t i = 0; i < amax.size(); ++i) {
    const float want_inv = amax[i] >= 1e-30f ? kFp8E4m3Max / amax[i] : 0.0f;  // as fp8.h
    ASSERT_EQ(bits(inv[i]), bits(want_inv)) << "amax " << amax[i];
    ASSERT_EQ(bits(scale[i]), bits(amax[i] / kFp8E4m3Max)) << "amax " << amax[i];
  }

  const int hd = 136, nvec = 2000;
  std::vector<float> x(size_t(hd) * nvec), am(nvec), vinv(nvec), vscale(nvec), xinv(x.size());
  for (int v = 0; v < nvec; ++v) {
    const double mag = std::exp2(-12.0 + 24.0 * rng.uniform());
    for (int i = 0; i < hd; ++i)
      x[size_t(v) * hd + i] = v == 7 ? 0.0f : round_bf16(float(rng.normal() * mag));
    float a = 0.0f;
    for (int i = 0; i < hd; ++i) a = std::fmax(a, std::fabs(x[size_t(v) * hd + i]));
    am[v] = a;
  }
  kv_fp8_check_scales(am.data(), nvec, vinv.data(), vscale.data());
  for (int v = 0; v < nvec; ++v)
    for (int i = 0; i < hd; ++i) xinv[size_t(v) * hd + i] = vinv[v];
  std::vector<uint8_t> q(x.size()), want(hd);
  kv_fp8_check_encode(x.data(), xinv.data(), x.size(), q.data());
  for (int v = 0; v < nvec; ++v) {
    const float s = kv_fp8_quantize(x.data() + size_t(v) * hd, hd, want.data());
    ASSERT_EQ(bits(vscale[v]), bits(s)) << "vector " << v;
    for (int i = 0; i < hd; ++i)
      ASSERT_EQ(q[size_t(v) * hd + i], want[i]) << "vector " << v << ", value " << i;
  }
}

}  // namespace
}  // namespace tandem::cuda::test
