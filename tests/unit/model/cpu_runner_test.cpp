// CpuRunner outside the goldens: the memory check, and invalid batches as clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "golden_util.h"
#include "model/cpu_runner.h"

namespace fs = std::filesystem;
using namespace tandem;

TEST(CpuRunner, RefusesAModelLargerThanMemoryBeforeLoading) {
  // A 32B-shaped config with no weights at all: refused on its numbers alone.
  fs::path d = fs::temp_directory_path() / ("tandem_big_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  write_file(d / "config.json", modeltest::qwen3_32b_config().dump());
  model::CpuRunnerOptions opt;
  opt.memory_limit_bytes = uint64_t(16) << 30;
  try {
    model::make_cpu_runner(d, opt);
    FAIL() << "a 32B model was accepted with 16 GiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource) << e.what();
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16.00"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(CpuRunner, InvalidBatchesAreErrors) {
  model::CpuRunnerOptions opt;
  opt.num_blocks = 8;
  opt.max_model_len = 100;
  auto r = model::make_cpu_runner(modeltest::test_model_dir("tiny"), opt);
  EXPECT_EQ(r->kv_layout().num_blocks, 8);
  EXPECT_EQ(r->kv_layout().head_dim, 16);
  modeltest::Paging paging(8, 16, 1);
  paging.add_sequence();
  auto good = paging.step({{0, {1, 2, 3}}}, true);
  std::vector<float> logits(3 * size_t(r->vocab_size()));
  EXPECT_NO_THROW(r->forward(good, logits));
  auto expect_error = [&](model::ForwardBatch b) { EXPECT_THROW(r->forward(b, logits), Error); };
  auto b = good;
  b.tokens[1] = r->vocab_size();  // out of vocabulary
  expect_error(b);
  b = good;
  b.slot_mapping[2] += 1;  // disagrees with the block table
  expect_error(b);
  b = good;
  b.block_tables[0] = 99;  // no such block
  expect_error(b);
  b = good;
  b.positions[1] = 5;  // not consecutive
  expect_error(b);
  b = good;
  b.context_lens[0] = 200;  // beyond max_model_len
  expect_error(b);
  b = good;
  b.logit_rows = {3};
  expect_error(b);
  std::vector<float> small(10);
  EXPECT_THROW(r->forward(good, small), Error);
  opt.block_size = 24;
  EXPECT_THROW(model::make_cpu_runner(modeltest::test_model_dir("tiny"), opt), Error);
}

TEST(CpuRunner, KvCacheDtypeIsParsedAndReported) {
  EXPECT_EQ(model::parse_kv_cache_dtype("bf16"), model::KvCacheDtype::kBf16);
  EXPECT_EQ(model::parse_kv_cache_dtype("auto"), model::KvCacheDtype::kBf16);
  EXPECT_EQ(model::parse_kv_cache_dtype("fp8"), model::KvCacheDtype::kFp8);
  EXPECT_EQ(model::parse_kv_cache_dtype("fp8_e4m3"), model::KvCacheDtype::kFp8);
  EXPECT_THROW(model::parse_kv_cache_dtype("int4"), Error);
  EXPECT_STREQ(model::kv_cache_dtype_name(model::KvCacheDtype::kFp8), "fp8");
  model::CpuRunnerOptions opt;
  opt.num_blocks = 8;
  opt.max_model_len = 100;
  opt.kv_cache_dtype = model::KvCacheDtype::kFp8;
  auto r = model::make_cpu_runner(modeltest::test_model_dir("tiny"), opt);
  EXPECT_EQ(r->kv_layout().dtype, model::KvCacheDtype::kFp8);
}
