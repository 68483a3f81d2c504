// CpuRunner on FP8 checkpoints (F8_E4M3 linear weights + weight_scale_inv): the same logits,
// bit for bit, as on a float32 checkpoint of the weights this test dequantizes itself; near
// the bf16 model the FP8 one was quantized from; FP8 weights counted as fp32 by the memory
// check; broken scale tensors as clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/fs.h"
#include "golden_util.h"
#include "model/cpu_runner.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace fs = std::filesystem;
using namespace tandem;
using model::Checkpoint;
using model::DType;
using model::TensorBlob;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p =
      fs::path(TANDEM_BINARY_DIR) / "testdata" / ("fp8test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  return p;
}

// Every tensor of a checkpoint, copied.
std::vector<TensorBlob> read_all(const Checkpoint& c) {
  std::vector<TensorBlob> r;
  for (const auto& name : c.names()) {
    auto t = c.get(name);
    const auto* p = static_cast<const uint8_t*>(t.data);
    r.push_back({name, model::dtype_name(t.dtype), t.shape, {p, p + t.bytes()}});
  }
  return r;
}

TensorBlob* find(std::vector<TensorBlob>& t, const std::string& name) {
  for (auto& b : t)
    if (b.name == name) return &b;
  return nullptr;
}

void write_model(const fs::path& dir, const json& config, std::vector<TensorBlob> tensors) {
  fs::create_directories(dir);
  write_file(dir / "config.json", config.dump(2));
  model::write_safetensors(dir / "model.safetensors", tensors);
}

// The FP8 model with every F8_E4M3 weight replaced by the float32 values its codes and
// BF16 scales stand for (W[i, j] = e4m3(q[i, j]) * S[i / 128][j / 128]), computed here
// element by element, and no quantization_config.
fs::path dequantized_f32_copy(const fs::path& fp8_dir, const std::string& name) {
  Checkpoint c(fp8_dir);
  std::vector<TensorBlob> out;
  for (const auto& n : c.names()) {
    if (n.ends_with("_scale_inv")) continue;
    auto t = c.get(n);
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (t.dtype != DType::kF8E4M3) {
      out.push_back({n, model::dtype_name(t.dtype), t.shape, {p, p + t.bytes()}});
      continue;
    }
    const int64_t N = t.shape[0], K = t.shape[1], kbs = (K + 127) / 128;
    auto s = c.get(n + "_scale_inv");
    EXPECT_EQ(s.dtype, DType::kBF16);
    const auto* sv = static_cast<const bf16*>(s.data);
    TensorBlob f{n, "F32", t.shape, std::vector<uint8_t>(size_t(N * K * 4))};
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < K; ++j) {
        const float v =
            fp8_e4m3_to_float(p[i * K + j]) * bf16_to_float(sv[(i / 128) * kbs + j / 128]);
        std::memcpy(f.data.data() + 4 * (i * K + j), &v, 4);
      }
    out.push_back(std::move(f));
  }
  json cfg = json::parse(read_file(fp8_dir / "config.json"));
  cfg.erase("quantization_config");
  const fs::path dir = scratch(name);
  write_model(dir, cfg, std::move(out));
  return dir;
}

// Logits of prompts of 1, 7 and 33 tokens prefilled together (every row), then three
// decode steps of fixed tokens: the same work for every model.
std::vector<float> run_logits(const fs::path& dir) {
  model::CpuRunnerOptions opt;
  opt.block_size = 16;
  opt.num_blocks = 32;
  opt.max_model_len = 64;
  auto r = model::make_cpu_runner(dir, opt);
  modeltest::Paging paging(opt.num_blocks, opt.block_size, 11);
  uint64_t x = 12345;
  auto id = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return model::TokenId((x >> 33) % 151669);
  };
  std::vector<std::pair<int, std::vector<model::TokenId>>> work;
  for (int len : {1, 7, 33}) {
    std::vector<model::TokenId> p;
    for (int i = 0; i < len; ++i) p.push_back(id());
    work.push_back({paging.add_sequence(), p});
  }
  std::vector<float> all;
  for (int step = 0; step < 4; ++step) {
    if (step > 0)
      for (auto& [s, toks] : work) toks = {id()};
    auto b = paging.step(work, /*all_logits=*/step == 0);
    std::vector<float> l(b.logit_rows.size() * size_t(r->vocab_size()));
    r->forward(b, l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

void expect_identical(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t differ = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    differ += std::memcmp(&a[i], &b[i], 4) != 0;
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  }
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << a.size()
                        << " logits differ, max |diff| " << worst;
}

void check_against_f32(const std::string& preset) {
  const fs::path fp8 = modeltest::test_model_dir(preset + "-fp8");
  const fs::path f32 = dequantized_f32_copy(fp8, preset + "-f32");
  const auto a = run_logits(fp8), b = run_logits(f32);
  expect_identical(a, b, preset + "-fp8 vs its float32 dequantization");
  std::printf(
      "%s-fp8: %zu logits (43 prefill rows, 3 x 3 decode rows) identical to the float32 "
      "checkpoint's\n",
      preset.c_str(), a.size());
  fs::remove_all(f32.parent_path());
}

// How far FP8 weights move the logits from those of the bf16 model they were made from.
// Rounding to 3 mantissa bits moves each weight by ~2.3% on average; through the random
// test models' chains of products that moves the logits by ~6-8% of their spread (rms),
// ~0.5 of it at worst. Bounds at about twice that: weights read wrongly (a transposed or
// misplaced scale) would move them by about their whole spread.
void check_near_bf16(const std::string& preset) {
  const auto a = run_logits(modeltest::test_model_dir(preset + "-fp8"));
  const auto b = run_logits(modeltest::test_model_dir(preset));
  ASSERT_EQ(a.size(), b.size());
  const size_t V = 151936, rows = a.size() / V;
  double worst = 0, sum_sq = 0, spread = 0;
  size_t same_top1 = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = a.data() + r * V;
    const float* y = b.data() + r * V;
    double mean = 0, var = 0;
    for (size_t i = 0; i < V; ++i) mean += y[i];
    mean /= double(V);
    for (size_t i = 0; i < V; ++i) {
      const double d = double(x[i]) - double(y[i]);
      worst = std::max(worst, std::fabs(d));
      sum_sq += d * d;
      var += (y[i] - mean) * (y[i] - mean);
    }
    spread += std::sqrt(var / double(V));
    same_top1 += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
  }
  const double rms = std::sqrt(sum_sq / double(a.size())), std_dev = spread / double(rows);
  std::printf(
      "%s-fp8 vs %s (bf16): max |logit diff| %.4f, rms %.4f, bf16 logits' std %.3f, "
      "same argmax in %zu of %zu rows\n",
      preset.c_str(), preset.c_str(), worst, rms, std_dev, same_top1, rows);
  EXPECT_LE(rms, 0.15 * std_dev) << preset;
  EXPECT_LE(worst, 1.0 * std_dev) << preset;
}

uint16_t exact_half(float f) {  // f must be a normal f16 value
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const int e = int((u >> 23) & 0xff) - 127;
  EXPECT_TRUE(e >= -14 && e <= 15 && (u & 0x1fff) == 0) << f << " is not a normal f16 value";
  return uint16_t(((u >> 16) & 0x8000) | uint32_t(e + 15) << 10 | ((u >> 13) & 0x3ff));
}

void expect_error(const fs::path& dir, ErrorKind kind, const std::vector<std::string>& words) {
  model::CpuRunnerOptions opt;
  opt.num_blocks = 4;
  opt.max_model_len = 64;
  try {
    model::make_cpu_runner(dir, opt);
    ADD_FAILURE() << dir << ": loaded";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "'" << w << "' missing from: " << e.what();
    std::printf("  %s\n", e.what());
  }
}

}  // namespace

TEST(CpuRunnerFp8, TinyMatchesItsFloat32Dequantization) {
  check_against_f32("tiny");
}

TEST(CpuRunnerFp8, SmallMatchesItsFloat32Dequantization) {
  check_against_f32("small");
}

TEST(CpuRunnerFp8, TinyStaysNearTheBf16Model) {
  check_near_bf16("tiny");
}

TEST(CpuRunnerFp8, SmallStaysNearTheBf16Model) {
  check_near_bf16("small");
}

// BF16, F16 and F32 scales of the same values give the same model.
TEST(CpuRunnerFp8, ScalesMayBeF16OrF32) {
  const fs::path src = modeltest::test_model_dir("tiny-fp8");
  const json cfg = json::parse(read_file(src / "config.json"));
  const auto want = run_logits(src);
  for (std::string dt : {"F16", "F32"}) {
    auto t = read_all(Checkpoint(src));
    for (auto& b : t) {
      if (!b.name.ends_with("_scale_inv")) continue;
      ASSERT_EQ(b.dtype, "BF16");
      std::vector<uint8_t> d;
      for (size_t i = 0; i < b.data.size(); i += 2) {
        const float v = bf16_to_float(bf16{uint16_t(b.data[i] | b.data[i + 1] << 8)});
        if (dt == "F16") {
          const uint16_t h = exact_half(v);
          d.insert(d.end(), {uint8_t(h & 0xff), uint8_t(h >> 8)});
        } else {
          uint8_t f[4];
          std::memcpy(f, &v, 4);
          d.insert(d.end(), f, f + 4);
        }
      }
      b.dtype = dt;
      b.data = d;
    }
    const fs::path dir = scratch("tiny-fp8-" + dt);
    write_model(dir, cfg, t);
    expect_identical(run_logits(dir), want, "scales in " + dt);
  }
  fs::remove_all(scratch("x").parent_path());
}

TEST(CpuRunnerFp8, BrokenCheckpointsAreClearErrors) {
  const fs::path src = modeltest::test_model_dir("tiny-fp8");
  const json cfg = json::parse(read_file(src / "config.json"));
  const std::string w = "model.layers.1.mlp.down_proj.weight";  // [64, 192]: scales [1, 2]
  auto variant = [&](const std::string& name, auto&& edit, json c) {
    auto t = read_all(Checkpoint(src));
    edit(t);
    const fs::path dir = scratch(name);
    write_model(dir, c, t);
    return dir;
  };
  auto no_edit = [](std::vector<TensorBlob>&) {};

  auto missing = variant(
      "missing",
      [&](std::vector<TensorBlob>& t) {
        std::erase_if(t, [&](auto& b) { return b.name == w + "_scale_inv"; });
      },
      cfg);
  expect_error(missing, ErrorKind::kInvalidArgument, {w + "_scale_inv", "no scale tensor"});

  auto shape = variant(
      "shape",
      [&](std::vector<TensorBlob>& t) {
        find(t, w + "_scale_inv")->shape = {2, 1};
      },
      cfg);
  expect_error(shape, ErrorKind::kInvalidArgument, {w + "_scale_inv", "[2, 1]", "[1, 2]"});

  auto dtype = variant(
      "dtype",
      [&](std::vector<TensorBlob>& t) {
        auto* s = find(t, w + "_scale_inv");
        s->dtype = "I32";
        s->data.resize(8);
      },
      cfg);
  expect_error(dtype, ErrorKind::kUnsupported, {w + "_scale_inv", "I32", "BF16, F16, F32"});

  json plain_cfg = cfg;
  plain_cfg.erase("quantization_config");
  auto noquant = variant("noquant", no_edit, plain_cfg);
  expect_error(noquant, ErrorKind::kUnsupported, {"F8_E4M3", "quantization_config"});

  auto wshape = variant(
      "wshape",
      [&](std::vector<TensorBlob>& t) {
        find(t, w)->shape = {192, 64};
      },
      cfg);
  expect_error(wshape, ErrorKind::kInvalidArgument, {w, "[192, 64]"});

  // An FP8 embedding is not an FP8 checkpoint of the supported kind.
  auto embed = variant(
      "embed",
      [&](std::vector<TensorBlob>& t) {
        auto* e = find(t, "model.embed_tokens.weight");
        e->dtype = "F8_E4M3";
        e->data.resize(e->data.size() / 2);
      },
      cfg);
  expect_error(embed, ErrorKind::kUnsupported, {"model.embed_tokens.weight", "F8_E4M3"});
  fs::remove_all(scratch("x").parent_path());
}

// FP8 linear weights are held as fp32 copies: a Qwen3-32B-shaped FP8 config needs ~119 GiB,
// refused with 80 GiB, where its bf16 twin (~61 GiB) passes the check (and then finds no
// weights in the empty folder).
TEST(CpuRunnerFp8, MemoryCheckCountsDequantizedWeights) {
  const fs::path d = scratch("fp8-32b");
  fs::create_directories(d);
  json c = modeltest::qwen3_32b_config();
  const double H = 5120, I = 25600, L = 64, Q = 64 * 128, KV = 8 * 128, V = 151936, D = 128;
  const double linear = L * (2 * H * Q + 2 * H * KV + 3 * H * I);
  const double other = 2 * V * H + L * (2 * H + 2 * D) + H;
  const double gib_fp8 = (4 * linear + 2 * other) / double(1ull << 30);
  const double gib_bf16 = 2 * (linear + other) / double(1ull << 30);
  model::CpuRunnerOptions opt;
  opt.memory_limit_bytes = uint64_t(80) << 30;
  opt.num_blocks = 1;
  write_file(d / "config.json", c.dump());
  try {
    model::make_cpu_runner(d, opt);
    FAIL() << "the bf16 twin loaded from an empty folder";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::kNotFound)) << e.what();  // past the memory check
  }
  c["quantization_config"] = {{"activation_scheme", "dynamic"},
                              {"fmt", "e4m3"},
                              {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  write_file(d / "config.json", c.dump());
  try {
    model::make_cpu_runner(d, opt);
    FAIL() << "a 32B FP8 model dequantized to fp32 was accepted with 80 GiB";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::kResource)) << e.what();
    EXPECT_NE(std::string(e.what()).find(fmt::format("{:.2f} GiB", gib_fp8)), std::string::npos)
        << e.what() << " (expected " << gib_fp8 << " GiB)";
    std::printf("  %s (bf16 twin: %.2f GiB)\n", e.what(), gib_bf16);
  }
  fs::remove_all(d.parent_path());
}

// The CPU runs a checkpoint's own weights: it refuses to quantize bf16 ones, or to run an FP8
// checkpoint as bf16, with the reason; naming the checkpoint's own format is fine.
TEST(CpuRunnerFp8, WeightDtypeMustBeTheCheckpointsOwn) {
  model::CpuRunnerOptions opt;
  opt.num_blocks = 8;
  opt.max_model_len = 64;
  opt.weight_dtype = model::WeightDtype::kFp8;
  try {
    model::make_cpu_runner(modeltest::test_model_dir("tiny"), opt);
    FAIL() << "bf16 weights quantized on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::kUnsupported));
    EXPECT_NE(std::string(e.what()).find("CUDA backend"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(model::make_cpu_runner(modeltest::test_model_dir("tiny-fp8"), opt));
  opt.weight_dtype = model::WeightDtype::kBf16;
  try {
    model::make_cpu_runner(modeltest::test_model_dir("tiny-fp8"), opt);
    FAIL() << "an FP8 checkpoint ran as bf16";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::kUnsupported));
    EXPECT_NE(std::string(e.what()).find("FP8 checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(model::make_cpu_runner(modeltest::test_model_dir("tiny"), opt));
}
