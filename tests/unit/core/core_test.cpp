#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/bf16.h"
#include "core/error.h"
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
