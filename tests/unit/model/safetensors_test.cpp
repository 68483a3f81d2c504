// The safetensors reader: round trip through the writer (single and sharded), and corrupt
// or truncated files, including a deterministic mutation fuzz of the header parser: every
// input either parses into in-bounds tensors or raises tandem::Error, never anything else.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace fs = std::filesystem;
using namespace tandem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tandem_st_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

model::TensorBlob blob(const std::string& name, const std::string& dtype,
                       std::vector<int64_t> shape, size_t esize, uint64_t seed) {
  size_t n = esize;
  for (auto d : shape) n *= size_t(d);
  model::TensorBlob b{name, dtype, shape, std::vector<uint8_t>(n)};
  Rng r(seed);
  for (auto& x : b.data) x = uint8_t(r.next());
  return b;
}

std::string read_all(const fs::path& p) {
  return read_file(p);
}

}  // namespace

TEST(Safetensors, RoundTripSingleFile) {
  fs::path d = scratch("single");
  std::vector<model::TensorBlob> t = {
      blob("a.weight", "BF16", {7, 13}, 2, 1), blob("b.bias", "F32", {5}, 4, 2),
      blob("c.half", "F16", {3, 1, 9}, 2, 3), blob("d.ids", "I64", {4}, 8, 4)};
  auto expect = t;
  model::write_safetensors(d / "model.safetensors", t);
  model::Checkpoint ck(d);
  for (auto& e : expect) {
    ASSERT_TRUE(ck.has(e.name));
    auto v = ck.get(e.name);
    EXPECT_EQ(v.shape, e.shape);
    EXPECT_EQ(std::memcmp(v.data, e.data.data(), e.data.size()), 0) << e.name;
  }
  EXPECT_EQ(ck.get("a.weight").dtype, model::DType::kBF16);
  EXPECT_THROW(ck.get("a.weight", {13, 7}, {model::DType::kBF16}), Error);
  EXPECT_THROW(ck.get("b.bias", {5}, {model::DType::kBF16}), Error);
  EXPECT_NO_THROW(ck.get("b.bias", {5}, {model::DType::kF32}));
  try {
    ck.get("missing.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing.weight"), std::string::npos);
  }
}

TEST(Safetensors, ShardedThroughIndex) {
  fs::path d = scratch("sharded");
  std::vector<model::TensorBlob> s1 = {blob("x.0", "BF16", {11, 3}, 2, 5)};
  std::vector<model::TensorBlob> s2 = {blob("x.1", "BF16", {2, 2}, 2, 6),
                                       blob("x.2", "F32", {1}, 4, 7)};
  auto e1 = s1, e2 = s2;
  model::write_safetensors(d / "model-00001-of-00002.safetensors", s1);
  model::write_safetensors(d / "model-00002-of-00002.safetensors", s2);
  nlohmann::json idx = {{"metadata", {{"total_size", 66 + 8 + 4}}},
                        {"weight_map",
                         {{"x.0", "model-00001-of-00002.safetensors"},
                          {"x.1", "model-00002-of-00002.safetensors"},
                          {"x.2", "model-00002-of-00002.safetensors"}}}};
  write_file(d / "model.safetensors.index.json", idx.dump());
  model::Checkpoint ck(d);
  EXPECT_EQ(std::memcmp(ck.get("x.0").data, e1[0].data.data(), e1[0].data.size()), 0);
  EXPECT_EQ(std::memcmp(ck.get("x.2").data, e2[1].data.data(), 4), 0);
  EXPECT_EQ(ck.total_bytes(), 66u + 8u + 4u);

  idx["weight_map"]["x.2"] = "model-00001-of-00002.safetensors";  // wrong shard
  write_file(d / "model.safetensors.index.json", idx.dump());
  EXPECT_THROW(model::Checkpoint{d}, Error);
  idx["weight_map"]["x.2"] = "../escape.safetensors";
  write_file(d / "model.safetensors.index.json", idx.dump());
  EXPECT_THROW(model::Checkpoint{d}, Error);
}

TEST(Safetensors, TruncatedAndCorruptFilesNameTheTensor) {
  fs::path d = scratch("corrupt");
  std::vector<model::TensorBlob> t = {blob("first", "BF16", {16, 16}, 2, 8),
                                      blob("second", "F32", {33}, 4, 9)};
  model::write_safetensors(d / "model.safetensors", t);
  std::string good = read_all(d / "model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, good.data(), 8);
  auto parse = [&](const std::string& bytes) {
    model::parse_safetensors_header(bytes, bytes.size(), "test.safetensors");
  };
  EXPECT_NO_THROW(parse(good));
  // Cut inside the data of the last tensor: the error names it.
  std::string cut = good.substr(0, good.size() - 10);
  try {
    parse(cut);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'second'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse(good.substr(0, 5)), Error);             // shorter than the length field
  EXPECT_THROW(parse(good.substr(0, 8 + hlen / 2)), Error);  // header cut
  std::string huge = good;
  uint64_t big = uint64_t(1) << 40;
  std::memcpy(huge.data(), &big, 8);
  EXPECT_THROW(parse(huge), Error);

  auto with_header = [&](const nlohmann::json& h, size_t data_bytes) {
    std::string hs = h.dump();
    uint64_t n = hs.size();
    std::string f(8, '\0');
    std::memcpy(f.data(), &n, 8);
    return f + hs + std::string(data_bytes, '\x01');
  };
  using nlohmann::json;
  json ok = {{"w", {{"dtype", "BF16"}, {"shape", {2, 3}}, {"data_offsets", {0, 12}}}}};
  EXPECT_NO_THROW(parse(with_header(ok, 12)));
  json wrong_size = {{"w", {{"dtype", "BF16"}, {"shape", {2, 3}}, {"data_offsets", {0, 10}}}}};
  EXPECT_THROW(parse(with_header(wrong_size, 12)), Error);
  json overlap = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                  {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  EXPECT_THROW(parse(with_header(overlap, 12)), Error);
  json bad_dtype = {{"w", {{"dtype", "Q4"}, {"shape", {2}}, {"data_offsets", {0, 2}}}}};
  EXPECT_THROW(parse(with_header(bad_dtype, 2)), Error);
  json neg = {{"w", {{"dtype", "U8"}, {"shape", {-2}}, {"data_offsets", {0, 2}}}}};
  EXPECT_THROW(parse(with_header(neg, 2)), Error);
  json overflow = {{"w",
                    {{"dtype", "F64"},
                     {"shape", {uint64_t(1) << 40, uint64_t(1) << 40}},
                     {"data_offsets", {0, 8}}}}};
  EXPECT_THROW(parse(with_header(overflow, 8)), Error);
  EXPECT_THROW(parse(with_header(json::array(), 0)), Error);
  std::string not_json = good;
  not_json[10] = '{';
  not_json[11] = '{';
  EXPECT_THROW(parse(not_json), Error);
}

TEST(Safetensors, FuzzedHeadersNeverCrash) {
  fs::path d = scratch("fuzz");
  std::vector<model::TensorBlob> t = {blob("model.layers.0.w", "BF16", {9, 5}, 2, 10),
                                      blob("model.norm", "F32", {7}, 4, 11),
                                      blob("model.emb", "F16", {3, 3}, 2, 12)};
  model::write_safetensors(d / "model.safetensors", t);
  const std::string good = read_all(d / "model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, good.data(), 8);
  Rng r(2024);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string f = good;
    int edits = 1 + int(r.next() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = size_t(r.next() % (8 + hlen));
      switch (r.next() % 4) {
        case 0:
          f[pos] = char(r.next());
          break;  // random byte
        case 1:
          f[pos] = "0123456789[]{},:\"-"[r.next() % 18];
          break;  // JSON-ish byte
        case 2:
          f.resize(size_t(r.next() % (f.size() + 1)));
          break;  // truncate
        default:
          f.erase(pos < f.size() ? pos : 0, 1);
          break;  // delete a byte
      }
      if (f.empty()) break;
    }
    try {
      auto h = model::parse_safetensors_header(f, f.size(), "fuzz");
      for (auto& ti : h.tensors) ASSERT_LE(h.data_start + ti.end, f.size());
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(parsed, 0);
}
