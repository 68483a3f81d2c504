// The CUDA runner against the CPU reference runner on the `tiny` and `small` test models:
// the same multi-step schedule (prefill chunks, a prefix continued in a later step, mixed
// prefill + decode batches, then decode steps that go through the CUDA graphs) must give
// the same logits within bf16 tolerance, and the same greedy tokens where the margin is
// clear. Three CUDA configurations: default (graphs + GEMV), library-only (cuBLASLt, no
// graphs), and tiny device passes that force a step to be split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/paths.h"
#include "core/rng.h"
#include "model/cpu_runner.h"
#include "model/cuda_runner.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;

namespace tandem::model {
namespace {

fs::path make_model(const std::string& preset) {
  fs::path dir =
      fs::temp_directory_path() / ("tandem-cuda-test-" + preset + "-" + std::to_string(::getpid()));
  if (fs::exists(dir / "model.safetensors")) return dir;
  auto tok = find_tokenizer_source();
  if (!tok) fail(ErrorKind::kNotFound, "tokenizer files not found (TANDEM_TOKENIZER_DIR)");
  // "<preset>-fp8": the preset with Qwen3-FP8-style linear weights (model/testmodel.h).
  const bool fp8 = preset.size() > 4 && preset.ends_with("-fp8");
  TestModelSpec spec = test_model_preset(fp8 ? preset.substr(0, preset.size() - 4) : preset);
  spec.fp8 = fp8;
  write_test_model(dir, spec, 0, *tok);
  return dir;
}

// Sequences get blocks from a shuffled free list.
class Paging {
 public:
  Paging(int num_blocks, int bs, uint64_t seed) : bs_(bs) {
    for (int i = 0; i < num_blocks; ++i) free_.push_back(i);
    Rng r(seed);
    for (size_t i = free_.size(); i > 1; --i) std::swap(free_[i - 1], free_[r.next() % i]);
  }
  ForwardBatch step(const std::vector<std::pair<int, std::vector<TokenId>>>& work) {
    ForwardBatch b;
    b.query_start.push_back(0);
    int max_blocks = 1;
    for (auto& [s, toks] : work) {
      if (size_t(s) >= len_.size()) len_.resize(s + 1, 0), blocks_.resize(s + 1);
      for (TokenId t : toks) {
        const int p = len_[s]++;
        if (p % bs_ == 0) {
          blocks_[s].push_back(free_.back());
          free_.pop_back();
        }
        b.tokens.push_back(t);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t(blocks_[s][p / bs_]) * bs_ + p % bs_);
      }
      b.query_start.push_back(int(b.tokens.size()));
      b.context_lens.push_back(len_[s]);
      b.logit_rows.push_back(int(b.tokens.size()) - 1);
      max_blocks = std::max(max_blocks, int(blocks_[s].size()));
    }
    b.max_blocks = max_blocks;
    for (auto& [s, toks] : work) {
      for (int i = 0; i < max_blocks; ++i)
        b.block_tables.push_back(i < int(blocks_[s].size()) ? blocks_[s][i] : -1);
    }
    return b;
  }

 private:
  int bs_;
  std::vector<int32_t> free_;
  std::vector<std::vector<int32_t>> blocks_;
  std::vector<int> len_;
};

struct Diff {
  double rel = 0;  // worst ||cuda - cpu|| / ||cpu|| over rows
  int worst_step = -1, worst_row = -1;
  double worst_norm = 0;  // ||cpu|| of the worst row
  int argmax_miss = 0;    // rows whose argmax differs although the CPU margin was > 0.5
  int rows = 0;
};

void compare(const std::vector<float>& cuda, const std::vector<float>& cpu, int V, int step,
             Diff& d) {
  for (size_t r = 0; r < cpu.size() / V; ++r) {
    double num = 0, den = 0;
    int ac = 0, ag = 0;
    for (int i = 0; i < V; ++i) {
      const double a = cuda[r * V + i], b = cpu[r * V + i];
      if (!std::isfinite(a)) num = INFINITY;
      num += (a - b) * (a - b);
      den += b * b;
      if (cuda[r * V + i] > cuda[r * V + ag]) ag = i;
      if (cpu[r * V + i] > cpu[r * V + ac]) ac = i;
    }
    float second = -INFINITY;
    for (int i = 0; i < V; ++i)
      if (i != ac) second = std::max(second, cpu[r * V + i]);
    if (std::sqrt(num / den) > d.rel) {
      d.rel = std::sqrt(num / den);
      d.worst_step = step;
      d.worst_row = int(r);
      d.worst_norm = std::sqrt(den / V);
    }
    if (ag != ac && cpu[r * V + ac] - second > 0.5f) ++d.argmax_miss;
    ++d.rows;
  }
}

// kv: the cache format of every runner; with FP8 the CPU reference holds the values an FP8
// cache reads back, so the comparison is between the two implementations of that format.
// weights: what the CUDA runners run the products as (kFp8 on a bf16 checkpoint: quantized
// at load, while the CPU reads the bf16 weights).
// FP8 weights add a variant whose products all take the weight-only GEMV (8-row passes):
// bf16 rows as the bf16 runner has them, so its bound is gemv_tol (loading and the GEMV
// checked apart from the rows' quantization).
void run_schedule(const std::string& preset, double tol, KvCacheDtype kv = KvCacheDtype::kBf16,
                  WeightDtype weights = WeightDtype::kAuto, double gemv_tol = 0,
                  bool check_argmax = true) {
  const fs::path dir = make_model(preset);
  const int bs = 16, blocks = 96;
  CpuRunnerOptions copt;
  copt.block_size = bs;
  copt.num_blocks = blocks;
  copt.kv_cache_dtype = kv;
  auto cpu = make_cpu_runner(dir, copt);
  const int V = cpu->vocab_size();

  struct Variant {
    const char* name;
    CudaRunnerOptions opt;
  };
  std::vector<Variant> variants(4);
  variants[0].name = "graphs+gemv";
  variants[0].opt.gemv_max_tokens = 4;  // the GEMV (and its PDL launch) inside the graphs
  variants[1].name = "cublas-only";
  variants[1].opt.cuda_graphs = false;
  variants[1].opt.gemv_max_tokens = 0;
  variants[2].name = "split-passes";
  variants[2].opt.max_num_tokens = 24;
  variants[2].opt.cuda_graphs = false;
  variants[3].name = "skinny";  // the gate/up product with its norm inside (sm_90a)
  variants[3].opt.skinny_min_bytes = 0;
  if (gemv_tol > 0) {
    variants.push_back({});
    variants[4].name = "fp8-gemv";
    variants[4].opt.max_num_tokens = 8;
    variants[4].opt.fp8_gemv_max_tokens = 8;
    variants[4].opt.cuda_graphs = false;
  }
  for (auto& v : variants) {
    v.opt.block_size = bs;
    v.opt.num_blocks = blocks;
    v.opt.max_model_len = 1024;
    v.opt.progress = false;
    v.opt.max_graph_batch = 8;
    v.opt.kv_cache_dtype = kv;
    v.opt.weight_dtype = weights;
  }
  std::vector<std::unique_ptr<Runner>> gpus;
  for (auto& v : variants) gpus.push_back(make_cuda_runner(dir.string(), v.opt));

  // The schedule: prompts of odd lengths, random tokens over the whole vocabulary.
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* e = std::getenv("TANDEM_TEST_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::printf("[ model ] %s schedule seed %llu (TANDEM_TEST_SEED fixes it)\n", preset.c_str(),
              static_cast<unsigned long long>(seed));
  Rng rng(seed);
  auto toks = [&](int n) {
    std::vector<TokenId> t(n);
    for (auto& x : t) x = TokenId(rng.next() % 151643);
    return t;
  };
  std::vector<std::vector<std::pair<int, std::vector<TokenId>>>> steps;
  steps.push_back({{0, toks(37)}, {1, toks(20)}});               // two prefills
  steps.push_back({{0, toks(1)}, {1, toks(75)}, {2, toks(5)}});  // decode + chunk + new
  steps.push_back({{1, toks(9)}, {0, toks(1)}, {2, toks(1)}});   // one-row seqs after a chunk
  steps.push_back({{0, toks(1)}, {2, toks(1)}, {1, toks(33)}});  // two decodes, then a chunk
  for (int i = 0; i < 5; ++i) steps.push_back({{0, toks(1)}, {1, toks(1)}, {2, toks(1)}});
  steps.push_back({{0, toks(1)}, {2, toks(1)}});  // a smaller decode batch (another bucket)
  steps.push_back({{0, toks(1)}, {2, toks(1)}});
  steps.push_back({{0, toks(1)}, {2, toks(1)}});

  std::vector<Paging> pg;
  for (size_t i = 0; i <= gpus.size(); ++i) pg.emplace_back(blocks, bs, 77 + i);
  std::vector<Diff> diffs(gpus.size());
  for (size_t si = 0; si < steps.size(); ++si) {
    const auto& st = steps[si];
    ForwardBatch b = pg[0].step(st);
    std::vector<float> ref(b.logit_rows.size() * size_t(V));
    cpu->forward(b, ref);
    for (size_t g = 0; g < gpus.size(); ++g) {
      ForwardBatch bg = pg[g + 1].step(st);  // own block placement per runner
      std::vector<float> out(ref.size(), NAN);
      gpus[g]->forward(bg, out);
      compare(out, ref, V, int(si), diffs[g]);
    }
  }
  for (size_t g = 0; g < gpus.size(); ++g) {
    std::printf(
        "[ model ] %s %s%s %-12s rows %d  worst rel error %.2e (step %d row %d, cpu rms %.3g)  "
        "argmax misses %d\n",
        preset.c_str(), kv_cache_dtype_name(kv), weights == WeightDtype::kFp8 ? " fp8-weights" : "",
        variants[g].name, diffs[g].rows, diffs[g].rel, diffs[g].worst_step, diffs[g].worst_row,
        diffs[g].worst_norm, diffs[g].argmax_miss);
    const bool gemv_only = std::string(variants[g].name) == "fp8-gemv";
    EXPECT_LT(diffs[g].rel, gemv_only ? gemv_tol : tol) << preset << " " << variants[g].name;
    // With FP8 rows the random model's near-ties may flip; the tight variants keep every
    // clear argmax.
    if (check_argmax && (gemv_tol <= 0 || gemv_only)) {
      EXPECT_EQ(diffs[g].argmax_miss, 0) << preset << " " << variants[g].name;
    }
  }
  auto st = cuda_runner_stats(*gpus[0]);
  EXPECT_GE(st.graphs_captured, 2) << "decode steps should have replayed graphs";
  fs::remove_all(dir);
}

TEST(CudaRunner, TinyMatchesCpuRunner) {
  run_schedule("tiny", 3e-2);
}
TEST(CudaRunner, SmallMatchesCpuRunner) {
  run_schedule("small", 3e-2);
}
// FP8: the CPU quantizes its fp32 K/V and the GPU its bf16 K/V, so a few codes land one
// e4m3 step apart (12% of a value): a looser bound than bf16's, still no argmax misses.
TEST(CudaRunner, TinyFp8CacheMatchesCpuRunner) {
  run_schedule("tiny", 6e-2, KvCacheDtype::kFp8);
}
TEST(CudaRunner, SmallFp8CacheMatchesCpuRunner) {
  run_schedule("small", 6e-2, KvCacheDtype::kFp8);
}

// FP8 weights (Hopper): the CUDA runner reads the checkpoint's codes and scales and runs
// its products on FP8 rows (quantized per 128 values) from 9 rows, bf16 rows in the GEMV
// below; the CPU dequantizes the same codes and keeps fp32 rows. Quantizing the rows moves
// each product by a few percent, and the random test model amplifies that into the logits,
// so those variants get a loose bound; the GEMV-only variant has bf16's.
bool fp8_weights_runnable() {
  CudaRunnerOptions o;
  o.weight_dtype = WeightDtype::kFp8;
  o.num_blocks = 64;
  o.max_model_len = 256;
  o.progress = false;
  try {
    make_cuda_runner(make_model("small").string(), o);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnsupported) throw;
    std::printf("[ model ] FP8 weights not runnable here: %s\n", e.what());
    return false;
  }
  return true;
}
TEST(CudaRunner, SmallFp8CheckpointMatchesCpuRunner) {
  if (!fp8_weights_runnable()) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
  run_schedule("small-fp8", 1.5e-1, KvCacheDtype::kBf16, WeightDtype::kAuto, 3e-2);
}
TEST(CudaRunner, SmallFp8CheckpointWithFp8CacheMatchesCpuRunner) {
  if (!fp8_weights_runnable()) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
  run_schedule("small-fp8", 1.5e-1, KvCacheDtype::kFp8, WeightDtype::kAuto, 6e-2);
}
// A bf16 checkpoint quantized at load (--quantization fp8) against the CPU on the bf16
// weights: the weights' quantization error on top (e4m3, 3 mantissa bits: about 10% of this
// random model's logits), so looser, and near-ties may flip.
TEST(CudaRunner, SmallQuantizedAtLoadStaysNearBf16CpuRunner) {
  if (!fp8_weights_runnable()) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
  run_schedule("small", 2.5e-1, KvCacheDtype::kBf16, WeightDtype::kFp8, 1.5e-1, false);
}
TEST(CudaRunner, Fp8WeightsNeedWholeBlocks) {
  CudaRunnerOptions o;
  o.weight_dtype = WeightDtype::kFp8;
  o.progress = false;
  try {
    make_cuda_runner(make_model("tiny").string(), o);  // hidden 64: not whole 128-blocks
    FAIL() << "tiny has no whole 128-blocks";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
}

TEST(CudaRunner, InvalidBatchIsAnError) {
  CudaRunnerOptions o;
  o.num_blocks = 8;
  o.max_model_len = 128;
  o.progress = false;
  auto r = make_cuda_runner("synthetic:qwen3-0.6b", o);
  ForwardBatch b;
  b.tokens = {1, 2};
  b.positions = {0, 1};
  b.query_start = {0, 2};
  b.context_lens = {2};
  b.max_blocks = 1;
  b.block_tables = {0};
  b.slot_mapping = {0, 1};
  b.logit_rows = {1};
  std::vector<float> out(size_t(r->vocab_size()));
  EXPECT_NO_THROW(r->forward(b, out));
  auto bad = b;
  bad.tokens[0] = 200000;
  EXPECT_THROW(r->forward(bad, out), Error);
  bad = b;
  bad.block_tables = {9};
  EXPECT_THROW(r->forward(bad, out), Error);
  bad = b;
  bad.positions = {3, 4};
  EXPECT_THROW(r->forward(bad, out), Error);
  std::vector<float> small(10);
  EXPECT_THROW(r->forward(b, small), Error);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST(CudaRunner, ModelThatDoesNotFitIsAClearError) {
  CudaRunnerOptions o;
  o.gpu_memory_utilization = 0.05;
  o.progress = false;
  try {
    make_cuda_runner("synthetic:qwen3-32b", o);
    FAIL() << "a 32B model fitted in 5% of the GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_cuda_runner("synthetic:qwen3-15b", o), Error);
}

// forward_greedy must return the argmax of what forward returns, on the prefill path and on
// the decode-graph path (first eager use, then capture, then replay).
TEST(CudaRunner, GreedyIsTheArgmaxOfTheLogits) {
  CudaRunnerOptions o;
  o.num_blocks = 64;
  o.max_model_len = 256;
  o.progress = false;
  auto r = make_cuda_runner("synthetic:qwen3-0.6b", o);
  const size_t V = size_t(r->vocab_size());
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* e = std::getenv("TANDEM_TEST_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::printf("[ model ] greedy seed %llu (TANDEM_TEST_SEED fixes it)\n",
              static_cast<unsigned long long>(seed));
  Rng rng(seed);
  auto argmax = [&](const std::vector<float>& l, size_t row) {
    return TokenId(std::max_element(l.begin() + row * V, l.begin() + (row + 1) * V) -
                   (l.begin() + row * V));
  };
  auto check = [&](const ForwardBatch& b) {
    std::vector<float> logits(b.logit_rows.size() * V);
    r->forward(b, logits);
    std::vector<TokenId> got(b.logit_rows.size(), -1);
    r->forward_greedy(b, got);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], argmax(logits, i)) << i;
  };
  // Prefill: sequences of 37 and 20 tokens in blocks [0, 3) and [8, 10) (block size 16).
  ForwardBatch p;
  p.max_blocks = 4;
  p.query_start = {0};
  const int lens[3] = {37, 20, 5};
  for (int s = 0; s < 3; ++s) {
    for (int t = 0; t < lens[s]; ++t) {
      p.tokens.push_back(TokenId(rng.next() % 151000));
      p.positions.push_back(t);
      p.slot_mapping.push_back(int64_t(s * 8 + t / 16) * 16 + t % 16);
    }
    p.query_start.push_back(int(p.tokens.size()));
    p.context_lens.push_back(lens[s]);
    for (int k = 0; k < 4; ++k) p.block_tables.push_back(s * 8 + k);
    p.logit_rows.push_back(int(p.tokens.size()) - 1);
  }
  ASSERT_TRUE(r->supports_greedy());
  check(p);
  // Decode steps: one new token per sequence, three times (eager, capture, replay).
  int ctx[3] = {37, 20, 5};
  for (int step = 0; step < 3; ++step) {
    ForwardBatch d;
    d.max_blocks = 4;
    d.query_start = {0};
    for (int s = 0; s < 3; ++s) {
      const int t = ctx[s]++;
      d.tokens.push_back(TokenId(rng.next() % 151000));
      d.positions.push_back(t);
      d.slot_mapping.push_back(int64_t(s * 8 + t / 16) * 16 + t % 16);
      d.query_start.push_back(s + 1);
      d.context_lens.push_back(t + 1);
      for (int k = 0; k < 4; ++k) d.block_tables.push_back(s * 8 + k);
      d.logit_rows.push_back(s);
    }
    check(d);
  }
}

}  // namespace
}  // namespace tandem::model
