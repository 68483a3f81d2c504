// The one model loader: sampling defaults from generation_config.json, EOS ids, backend
// choice, and a real load of the tiny test model on the CPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "core/paths.h"
#include "model/model_loader.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;
using namespace tandem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tandem_loader_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

struct DefaultsCase {
  const char* name;
  const char* file;  // nullptr: no generation_config.json
  float t_temp, t_top_p;
  int t_top_k;
  float p_temp, p_top_p;
};

TEST(ModelLoader, GenerationDefaults) {
  const std::vector<DefaultsCase> cases = {
      {"no file: Qwen3's recommendations", nullptr, 0.6f, 0.95f, 20, 0.7f, 0.8f},
      {"hybrid Qwen3 file",
       R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20})", 0.6f, 0.95f, 20,
       0.7f, 0.8f},
      {"instruct-2507 file",
       R"({"do_sample": true, "temperature": 0.7, "top_p": 0.8, "top_k": 20})", 0.7f, 0.8f, 20,
       0.7f, 0.8f},
      {"greedy file", R"({"do_sample": false, "temperature": 0.6, "top_p": 0.95})", 0.0f, 0.95f, 50,
       0.0f, 0.95f},
      {"a fine-tune's own values", R"({"do_sample": true, "temperature": 0.3, "top_k": 5})", 0.3f,
       1.0f, 5, 0.3f, 1.0f},
      {"not an object", "[1, 2]", 0.6f, 0.95f, 20, 0.7f, 0.8f},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    fs::path d = scratch("gc");
    if (c.file) write_file(d / "generation_config.json", c.file);
    auto g = model::read_generation_defaults(d);
    EXPECT_FLOAT_EQ(g.thinking.temperature, c.t_temp);
    EXPECT_FLOAT_EQ(g.thinking.top_p, c.t_top_p);
    EXPECT_EQ(g.thinking.top_k, c.t_top_k);
    EXPECT_FLOAT_EQ(g.plain.temperature, c.p_temp);
    EXPECT_FLOAT_EQ(g.plain.top_p, c.p_top_p);
  }
}

TEST(ModelLoader, BackendChoice) {
  EXPECT_EQ(model::choose_backend("cpu", "/some/folder"), "cpu");
  EXPECT_THROW(model::choose_backend("cpu", "synthetic:qwen3-14b"), Error);
  EXPECT_THROW(model::choose_backend("tpu", "/some/folder"), Error);
#ifndef TANDEM_HAVE_CUDA
  // Without CUDA in the build, auto is the CPU and cuda is refused with the flag to use.
  EXPECT_EQ(model::choose_backend("auto", "/some/folder"), "cpu");
  try {
    model::choose_backend("cuda", "/some/folder");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--backend cpu"), std::string::npos) << e.what();
  }
#endif
}

TEST(ModelLoader, LoadsTheTinyModelOnTheCpu) {
  auto tok = find_tokenizer_source();
  ASSERT_TRUE(tok.has_value()) << "run `make deps` first: the npm tokenizer package is missing";
  fs::path dir = scratch("m") / "tiny";
  model::write_test_model(dir, model::test_model_preset("tiny"), 4, *tok);
  model::LoaderOptions lo;
  lo.backend = "cpu";
  auto m = model::load_model(dir.string(), lo);
  EXPECT_EQ(m.backend, "cpu");
  EXPECT_EQ(m.quantization_level, "BF16");
  ASSERT_TRUE(m.runner && m.tokenizer);
  EXPECT_EQ(m.weight_bytes, fs::file_size(dir / "model.safetensors"));
  // The CPU caps its context so that its KV cache stays small.
  EXPECT_EQ(m.runner->max_model_len(), std::min(8192, m.config.max_position_embeddings));
  // EOS: the config's, generation_config's and the tokenizer's end tokens, once each.
  const auto im_end = *m.tokenizer->find_token("<|im_end|>");
  const auto eot = *m.tokenizer->find_token("<|endoftext|>");
  EXPECT_TRUE(std::count(m.eos_ids.begin(), m.eos_ids.end(), im_end) == 1);
  EXPECT_TRUE(std::count(m.eos_ids.begin(), m.eos_ids.end(), eot) == 1);
  EXPECT_TRUE(std::is_sorted(m.eos_ids.begin(), m.eos_ids.end()));
  EXPECT_TRUE(m.defaults.from_file);
  EXPECT_THROW(model::load_model((dir / "nope").string(), lo), Error);
}

}  // namespace
