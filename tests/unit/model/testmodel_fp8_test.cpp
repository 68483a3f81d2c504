// The FP8 test models against the plain ones of the same preset and seed: the linear
// weights as F8_E4M3 codes plus BF16 weight_scale_inv per 128x128 block, each scale the
// bf16 rounding of the block's amax / 448, each value within e4m3's rounding of the bf16
// weight; every other tensor and config key unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/fp8.h"
#include "core/fs.h"
#include "core/paths.h"
#include "core/sha256.h"
#include "golden_util.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;
using namespace tandem;
using model::Checkpoint;
using model::DType;
using nlohmann::json;

namespace {

bool is_linear(const std::string& name) {
  for (auto s : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                 "gate_proj.weight", "up_proj.weight", "down_proj.weight"})
    if (name.size() > std::strlen(s) && name.ends_with(s)) return true;
  return false;
}

float bf16_at(const void* p, int64_t i) {
  return bf16_to_float(static_cast<const bf16*>(p)[i]);
}

void check_fp8_model(const std::string& preset) {
  const fs::path plain_dir = modeltest::test_model_dir(preset);
  const fs::path fp8_dir = modeltest::test_model_dir(preset + "-fp8");
  Checkpoint plain(plain_dir), fp8(fp8_dir);

  // config.json: the plain one plus quantization_config.
  json pc = json::parse(read_file(plain_dir / "config.json"));
  json fc = json::parse(read_file(fp8_dir / "config.json"));
  EXPECT_EQ(fc["quantization_config"], json({{"activation_scheme", "dynamic"},
                                             {"fmt", "e4m3"},
                                             {"quant_method", "fp8"},
                                             {"weight_block_size", {128, 128}}}));
  EXPECT_EQ(fc["torch_dtype"], "bfloat16");
  fc.erase("quantization_config");
  EXPECT_EQ(fc, pc);
  const model::ModelConfig cfg = model::load_config(fp8_dir);
  ASSERT_TRUE(cfg.fp8.has_value());

  int linear = 0;
  int64_t elements = 0, subnormal = 0;
  double worst_bound_use = 0, sum_rel = 0;  // |deq - w| / bound; mean |deq - w| / |w|
  for (const auto& name : plain.names()) {
    const auto p = plain.get(name);
    if (!is_linear(name)) {  // byte-identical
      const auto f = fp8.get(name);
      ASSERT_EQ(f.dtype, p.dtype) << name;
      ASSERT_EQ(f.shape, p.shape) << name;
      EXPECT_EQ(std::memcmp(f.data, p.data, p.bytes()), 0) << name;
      EXPECT_FALSE(fp8.has(name + "_scale_inv")) << name;
      continue;
    }
    ++linear;
    ASSERT_EQ(p.dtype, DType::kBF16);
    const int64_t N = p.shape[0], K = p.shape[1];
    const int64_t nbs = (N + 127) / 128, kbs = (K + 127) / 128;
    const auto codes = fp8.get(name, {N, K}, {DType::kF8E4M3});
    const auto scales = fp8.get(name + "_scale_inv", {nbs, kbs}, {DType::kBF16});
    const auto* q = static_cast<const uint8_t*>(codes.data);
    for (int64_t nb = 0; nb < nbs; ++nb)
      for (int64_t kb = 0; kb < kbs; ++kb) {
        const int64_t n1 = std::min(N, nb * 128 + 128), k1 = std::min(K, kb * 128 + 128);
        float amax = 0;
        for (int64_t n = nb * 128; n < n1; ++n)
          for (int64_t k = kb * 128; k < k1; ++k)
            amax = std::max(amax, std::fabs(bf16_at(p.data, n * K + k)));
        const float s = bf16_at(scales.data, nb * kbs + kb);
        ASSERT_EQ(s, round_bf16(amax / 448.0f)) << name << " block " << nb << "," << kb;
        ASSERT_GT(s, 0.0f) << name;
        for (int64_t n = nb * 128; n < n1; ++n)
          for (int64_t k = kb * 128; k < k1; ++k) {
            const float w = bf16_at(p.data, n * K + k);
            const uint8_t c = q[n * K + k];
            ASSERT_EQ(c, float_to_fp8_e4m3(w / s)) << name << " [" << n << "," << k << "]";
            // e4m3 keeps 3 mantissa bits: rounding moves a normal value by at most 2^-4 of
            // itself, a subnormal one (|w / s| < 2^-6, steps of 2^-9) by at most 2^-10 s.
            // Saturation (amax / s may exceed 448 by bf16's 2^-9) stays inside 2^-4 |w|.
            const float deq = fp8_e4m3_to_float(c) * s;
            const double err = std::fabs(double(deq) - double(w));
            const double bound = std::ldexp(std::fabs(double(w)), -4) + std::ldexp(double(s), -10);
            ASSERT_LE(err, bound) << name << " [" << n << "," << k << "] w=" << w << " deq=" << deq
                                  << " s=" << s;
            worst_bound_use = std::max(worst_bound_use, err / bound);
            if (w != 0) sum_rel += err / std::fabs(double(w));
            subnormal += std::fabs(w / s) < 0.015625f;
            ++elements;
          }
      }
  }
  EXPECT_EQ(linear, 7 * cfg.num_hidden_layers);
  EXPECT_EQ(fp8.names().size(), plain.names().size() + size_t(linear));  // + one scale each
  EXPECT_EQ(elements, cfg.num_linear_params());
  std::printf(
      "%s-fp8: %lld linear weight values, mean |deq - w| / |w| = %.4f, worst error / "
      "bound = %.3f, %lld subnormal codes\n",
      preset.c_str(), (long long)elements, sum_rel / double(elements), worst_bound_use,
      (long long)subnormal);
}

}  // namespace

TEST(TestModelFp8, TinyIsThePlainModelQuantizedInPartialBlocks) {
  check_fp8_model("tiny");  // hidden 64, intermediate 192: every block partial
}

TEST(TestModelFp8, SmallIsThePlainModelQuantizedInFullBlocks) {
  check_fp8_model("small");  // every dimension a multiple of 128
}

TEST(TestModelFp8, IsDeterministic) {
  auto tok = find_tokenizer_source();
  ASSERT_TRUE(tok.has_value()) << "run `make deps` first: the npm tokenizer package is missing";
  auto spec = model::test_model_preset("tiny");
  spec.fp8 = true;
  const fs::path d = fs::temp_directory_path() / ("tandem_tmfp8_" + std::to_string(::getpid()));
  fs::remove_all(d);
  model::write_test_model(d / "a", spec, 0, *tok);
  model::write_test_model(d / "b", spec, 0, *tok);
  for (auto f : {"config.json", "model.safetensors"})
    EXPECT_EQ(sha256_file_hex(d / "a" / f), sha256_file_hex(d / "b" / f)) << f;
  fs::remove_all(d);
}
