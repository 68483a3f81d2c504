#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/sha256.h"

namespace fs = std::filesystem;
using namespace tandem;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks, and a length that crosses the 56-byte padding boundary.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  Rng rng(3);
  std::string data(10007, '\0');
  for (auto& c : data) c = char(rng.next());
  Sha256 h;
  for (size_t i = 0; i < data.size();) {
    size_t n = std::min<size_t>(1 + rng.next() % 130, data.size() - i);
    h.update(data.data() + i, n);
    i += n;
  }
  EXPECT_EQ(h.hex_digest(), sha256_hex(data));
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly half-way between 1 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3*2^-8 is half-way between 1+2^-7 (odd) and 1+2^-6 (even): goes up.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(Fp8E4m3, KnownValues) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(500.0f), 0x7e);  // saturates instead of becoming NaN
  EXPECT_EQ(float_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-448.0f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);       // the smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);      // tie between 0 and 2^-9: even
  EXPECT_EQ(float_to_fp8_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);  // tie between 1 and 2: even
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -6)), 0x08);       // the smallest normal
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);  // tie between 1 and 1.125: even (1)
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);  // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(float_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x3a), 1.25f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
}

TEST(Fp8E4m3, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = fp8_e4m3_to_float(uint8_t(c));
    ASSERT_TRUE(std::isfinite(v)) << c;
    EXPECT_EQ(float_to_fp8_e4m3(v), c) << "code " << c << " = " << v;
  }
}

// Encoding is monotone, odd (sign symmetric) and never further from x than half a step.
TEST(Fp8E4m3, EncodeIsMonotoneAndNearest) {
  float prev = -INFINITY;
  int steps = 0;
  for (double x = -600.0; x <= 600.0; x += 1.0 / 4096, ++steps) {
    const float f = float(x);
    const float v = fp8_e4m3_to_float(float_to_fp8_e4m3(f));
    ASSERT_GE(v, prev) << "x = " << f;
    prev = v;
    ASSERT_EQ(float_to_fp8_e4m3(-f) & 0x7f, float_to_fp8_e4m3(f) & 0x7f) << "x = " << f;
    if (std::fabs(f) <= 448.0f) {
      // The step around |x|: 2^-9 in the subnormal range, else 2^(e - 3) for |x| in [2^e, 2^e+1).
      const float a = std::fabs(f);
      const float step = a < 0.015625f ? std::ldexp(1.0f, -9) : std::ldexp(1.0f, std::ilogb(a) - 3);
      ASSERT_LE(std::fabs(v - f), step / 2) << "x = " << f;
    }
  }
  EXPECT_GT(steps, 4000000);
  // Over the small range too, where steps are fine.
  prev = -INFINITY;
  for (float x = -0.05f; x <= 0.05f; x += 1e-6f) {
    const float v = fp8_e4m3_to_float(float_to_fp8_e4m3(x));
    ASSERT_GE(v, prev) << "x = " << x;
    prev = v;
  }
}

TEST(Fp8E4m3, KvQuantizeUsesTheFullRange) {
  Rng rng(11);
  const int n = 136;
  std::vector<float> x(n);
  std::vector<uint8_t> q(n);
  for (int trial = 0; trial < 2000; ++trial) {
    const double mag = std::ldexp(1.0, int(rng.next() % 40) - 20);
    for (auto& v : x) v = round_bf16(float(rng.normal() * mag));
    const float s = kv_fp8_quantize(x.data(), n, q.data());
    float amax = 0.0f, cmax = 0.0f;
    for (int i = 0; i < n; ++i) {
      amax = std::fmax(amax, std::fabs(x[i]));
      cmax = std::fmax(cmax, std::fabs(fp8_e4m3_to_float(q[i])));
    }
    ASSERT_EQ(s, amax / 448.0f);
    ASSERT_EQ(cmax, 448.0f) << "trial " << trial;  // the largest |x| maps to the top code
    for (int i = 0; i < n; ++i) {
      const float back = fp8_e4m3_to_float(q[i]) * s;
      // Half an e4m3 step: 2^-4 relative for normal codes; subnormal codes (scaled values
      // below 2^-6) have an absolute step of 2^-9 s. The slack covers the fp32 roundings of
      // the scale and of x * (448 / amax).
      const double tol = std::max(std::fabs(double(x[i])) / 16.0, std::ldexp(double(s), -10));
      ASSERT_LE(std::fabs(double(back) - x[i]), tol * (1 + 1e-5)) << "trial " << trial << ", " << i;
    }
  }
  std::vector<float> zero(n, 0.0f);
  std::vector<uint8_t> qz(n, 0xff);
  EXPECT_EQ(kv_fp8_quantize(zero.data(), n, qz.data()), 0.0f);
  for (uint8_t c : qz) EXPECT_EQ(c, 0);
}

TEST(Rng, SameSeedSameStreamAndPlausibleNormals) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(Rng(42).next(), c.next());
  Rng r(5);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = r.normal();
    s += x;
    s2 += x * x;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
}

TEST(StagingDir, PublishesOnlyOnCommitAndRefusesNonEmptyTargets) {
  fs::path base = fs::temp_directory_path() / ("tandem_stage_" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  {
    StagingDir s(base / "out");
    write_file(s.path() / "a.txt", "x");
    EXPECT_FALSE(fs::exists(base / "out"));
  }  // not committed: nothing published, staging removed
  EXPECT_FALSE(fs::exists(base / "out"));
  EXPECT_TRUE(fs::is_empty(base));
  {
    StagingDir s(base / "out");
    write_file(s.path() / "a.txt", "x");
    s.commit();
  }
  EXPECT_EQ(read_file(base / "out" / "a.txt"), "x");
  EXPECT_THROW(StagingDir(base / "out"), Error);
  write_file(base / "file", "y");
  EXPECT_THROW(StagingDir(base / "file"), Error);
  EXPECT_THROW(StagingDir(base / "file" / "sub"), Error);  // parent is a regular file
  fs::remove_all(base);
}
