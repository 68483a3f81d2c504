#pragma once
// Qwen3 on the CUDA backend: model::Runner on one GPU, bf16 or FP8 weights (FP8: Hopper),
// bf16 or FP8 KV cache.
//
// Memory: weights first, then activations for max_num_tokens rows, then the paged KV cache
// gets what gpu_memory_utilization leaves (`num_blocks` overrides it). A model that does
// not fit is refused with the numbers.
// Steps: any mix of prefill chunks and decodes (the attention reads the paged cache, so
// chunked prefill and prefix-cache hits just work); a batch larger than max_num_tokens is
// run in pieces. Pure decode steps of up to max_graph_batch sequences replay a CUDA graph
// captured per batch-size bucket (1, 2, 4, 8, 16, 32, ..., max_graph_batch).
#include <cstdint>
#include <memory>
#include <string>

#include "model/runner.h"

namespace tandem::model {

struct CudaRunnerOptions {
  int block_size = 16;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kBf16;
  WeightDtype weight_dtype = WeightDtype::kAuto;
  double gpu_memory_utilization = 0.90;  // share of the GPU's memory tandem may use
  int max_model_len = 0;                 // 0: the config's max_position_embeddings
  int num_blocks = 0;                    // 0: from gpu_memory_utilization
  int max_num_tokens = 8192;             // rows per device pass (activation buffers)
  int max_graph_batch = 256;             // largest decode batch replayed from a graph
  bool cuda_graphs = true;
  // Decode GEMMs with at most this many rows use the custom GEMV kernel; 0: cuBLASLt only.
  // (H200: the GEMV beats cuBLASLt at 1 row, cuBLASLt wins from 2 rows.)
  int gemv_max_tokens = 1;
  // FP8 weights: rows up to which the weight-only FP8 GEMV runs (bf16 rows, no row
  // quantization); -1: Fp8Gemm's default (8).
  int fp8_gemv_max_tokens = -1;
  // The smallest gate/up weight the skinny GEMM takes, in bytes (-1: the library default,
  // Gemm::set_skinny_min_bytes; tests set 0 so that small models use it too).
  int64_t skinny_min_bytes = -1;
  uint64_t seed = 1;  // synthetic weights
  bool progress = true;
  int device = 0;
};

// `model`: a checkpoint folder, or "synthetic:qwen3-14b" (see model/synthetic.h).
// Throws tandem::Error when CUDA is not compiled in, no GPU is usable, the model is
// malformed or does not fit.
std::unique_ptr<Runner> make_cuda_runner(const std::string& model, const CudaRunnerOptions& opt);

// Device facts the benchmark reports next to its figures.
struct CudaRunnerStats {
  uint64_t weight_bytes = 0;       // on the GPU
  uint64_t step_weight_bytes = 0;  // read by one decode step (all but the embedding table)
  uint64_t kv_bytes = 0;
  int num_sms = 0;
  std::string device_name;
  int graphs_captured = 0;
  bool fp8_weights = false;
};
CudaRunnerStats cuda_runner_stats(const Runner& r);  // r must come from make_cuda_runner

// The weights of a CUDA runner, as its forward reads them (tests check them against the
// checkpoint after steps have run).
class CudaWeights;
const CudaWeights& cuda_runner_weights(const Runner& r);

// Sets the small-batch GEMV threshold of a CUDA runner at run time (benchmarks, tests).
void set_cuda_gemv_max_tokens(Runner& r, int t);

}  // namespace tandem::model
