// The loader on a machine with a GPU: `--backend auto` takes the GPU, and a model the GPU
// cannot run stops the load with the GPU's reason and the CPU flag instead of moving to the
// CPU by itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/paths.h"
#include "model/model_loader.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;
using namespace tandem;

TEST(ModelLoaderGpu, AutoTakesTheGpuAndNeverFallsBackQuietly) {
  auto tok = find_tokenizer_source();
  ASSERT_TRUE(tok.has_value()) << "run `make deps` first: the npm tokenizer package is missing";
  const fs::path root =
      fs::temp_directory_path() / ("tandem_loader_gpu_" + std::to_string(getpid()));
  fs::remove_all(root);
  auto spec = model::test_model_preset("tiny");
  model::write_test_model(root / "ok", spec, 1, *tok);
  spec.head_dim = 24;  // the CPU runs it; the CUDA kernels take 16, 32, 64 or 128
  model::write_test_model(root / "odd", spec, 1, *tok);

  model::LoaderOptions lo;
  lo.backend = "auto";
  lo.cuda.gpu_memory_utilization = 0.2;
  EXPECT_EQ(model::load_model((root / "ok").string(), lo).backend, "cuda");
  try {
    model::load_model((root / "odd").string(), lo);
    ADD_FAILURE() << "a model the GPU cannot run was loaded with --backend auto";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("head_dim"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--backend cpu"), std::string::npos) << msg;
  }
  lo.backend = "cpu";
  EXPECT_EQ(model::load_model((root / "odd").string(), lo).backend, "cpu");
  fs::remove_all(root);
}
