#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/paths.h"
#include "core/sha256.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;
using namespace tandem;

namespace {
fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tandem_tm_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  return p;
}
}  // namespace

TEST(TestModel, TinyIsDeterministicAndWellFormed) {
  auto tok = find_tokenizer_source();
  ASSERT_TRUE(tok.has_value()) << "run `make deps` first: the npm tokenizer package is missing";
  auto spec = model::test_model_preset("tiny");
  fs::path a = scratch("a"), b = scratch("b"), c = scratch("c");
  model::write_test_model(a, spec, 1, *tok);
  model::write_test_model(b, spec, 1, *tok);
  model::write_test_model(c, spec, 2, *tok);
  for (auto f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json"})
    EXPECT_EQ(sha256_file_hex(a / f), sha256_file_hex(b / f)) << f;
  EXPECT_NE(sha256_file_hex(a / "model.safetensors"), sha256_file_hex(c / "model.safetensors"));
  EXPECT_LT(fs::file_size(a / "model.safetensors"), 25u << 20);

  // The safetensors header: every tensor present, offsets contiguous, sizes = bf16 x shape.
  std::string data = read_file(a / "model.safetensors");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= uint64_t(uint8_t(data[i])) << (8 * i);
  ASSERT_EQ(hlen % 8, 0u);
  auto h = nlohmann::json::parse(data.substr(8, hlen));
  uint64_t expect_begin = 0, total = 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [begin, end)
  for (auto& [name, t] : h.items()) {
    if (name == "__metadata__") continue;
    uint64_t n = 2;
    for (auto d : t["shape"]) n *= d.get<uint64_t>();
    uint64_t b0 = t["data_offsets"][0], b1 = t["data_offsets"][1];
    EXPECT_EQ(b1 - b0, n) << name;
    EXPECT_EQ(t["dtype"], "BF16");
    spans.push_back({b0, b1});
    total += n;
  }
  std::sort(spans.begin(), spans.end());
  for (auto& [b0, b1] : spans) {
    EXPECT_EQ(b0, expect_begin);  // contiguous, no gaps or overlaps
    expect_begin = b1;
  }
  EXPECT_EQ(8 + hlen + total, data.size());
  EXPECT_TRUE(h.contains("model.embed_tokens.weight"));
  EXPECT_TRUE(h.contains("model.layers.1.self_attn.k_norm.weight"));
  EXPECT_FALSE(h.contains("lm_head.weight"));  // tied
  auto cfg = nlohmann::json::parse(read_file(a / "config.json"));
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["vocab_size"], 151936);
  EXPECT_EQ(h["model.embed_tokens.weight"]["shape"], nlohmann::json({151936, 64}));
  fs::remove_all(a.parent_path());
}

TEST(TestModel, RefusesNonEmptyFolderWithoutTouchingIt) {
  auto tok = find_tokenizer_source();
  ASSERT_TRUE(tok.has_value());
  fs::path d = scratch("busy");
  fs::create_directories(d);
  write_file(d / "keep.txt", "mine");
  EXPECT_THROW(model::write_test_model(d, model::test_model_preset("tiny"), 0, *tok), Error);
  EXPECT_EQ(read_file(d / "keep.txt"), "mine");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d.parent_path());
}

TEST(TestModel, UnknownPresetIsAnError) {
  EXPECT_THROW(model::test_model_preset("huge"), Error);
}
