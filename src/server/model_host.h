#pragma once
// Loading a model for serving: tokenizer, config, runner (CUDA or CPU), engine, and the
// ServerContext the routes read. Shared by `tandem serve` and `tandem run` (in-process).
#include <memory>
#include <string>
#include <vector>

#include "server/context.h"

namespace tandem::server {

struct ModelHostOptions {
  std::string model;                      // checkpoint folder or "synthetic:qwen3-14b"
  std::vector<std::string> served_names;  // default: the folder's name / the synthetic name
  std::string backend = "auto";           // auto | cpu | cuda
  int max_model_len = 0;                  // 0: the model's (CPU: capped to keep memory small)
  int max_num_seqs = 256;
  int max_num_batched_tokens = 4096;  // tokens (prefill + decode) in one engine step at most
  int decode_step_tokens = -1;        // cap on a decoding step's prefill (0: off, -1: backend's)
  double ttft_target_ms = 300;        // ... lifted for prompts that would miss this
  int threads = 0;                    // CPU backend threads; 0 = all cores
  double gpu_memory_utilization = 0.90;
  std::string kv_cache_dtype = "bf16";  // bf16 | fp8 (model/runner.h KvCacheDtype)
  std::string quantization = "auto";    // auto | bf16 | fp8 (model/runner.h WeightDtype)
  bool enable_prefix_caching = true;
  uint64_t cpu_memory_limit_bytes = 0;  // CPU backend: RAM it may use (0: the machine's)
  ServerOptions server;
};

// Owns the engine; `ctx` points into it.
struct ModelHost {
  std::unique_ptr<Generator> gen;
  ServerContext ctx;
};

// Throws tandem::Error with a message naming what is wrong (missing folder, bad config,
// model too large for the device).
std::unique_ptr<ModelHost> load_model_host(const ModelHostOptions& opt);

}  // namespace tandem::server
