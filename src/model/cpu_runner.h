#pragma once
// Qwen3 on the CPU backend: the reference forward pass every faster path is checked
// against. Weights stay in the memory-mapped checkpoint in their stored dtype (bf16, f16 or
// f32); the block-scaled FP8 linear weights of Qwen3-*-FP8 checkpoints are dequantized
// once at load into fp32 copies (exact, see model/fp8_weights.h). Activations, K/V cache
// and accumulation are fp32 (the cache optionally rounded to what an FP8 cache holds), so
// it matches transformers' fp32 forward to ~1e-5. K/V live in the paged layout of
// model/runner.h.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "model/runner.h"

namespace tandem::model {

struct CpuRunnerOptions {
  int block_size = 16;  // 16 or 32 tokens per KV block
  // kFp8: the cache holds what an FP8 cache reads back (as floats: the same memory), so the
  // reference shows that format's effect on the logits.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kBf16;
  // The CPU runs a checkpoint's own weights (an FP8 one dequantized to fp32): kAuto, or the
  // checkpoint's format named; quantizing bf16 weights (kFp8) or running an FP8 checkpoint
  // as bf16 is refused.
  WeightDtype weight_dtype = WeightDtype::kAuto;
  int num_blocks = 0;     // 0 = enough for max_model_len of 4 sequences (capped by memory)
  int threads = 0;        // 0 = all cores
  int max_model_len = 0;  // 0 = config's max_position_embeddings
  // Memory the model may use; 0 = this machine's RAM (MemTotal). A model whose weights and
  // KV cache exceed it is refused before anything is loaded.
  uint64_t memory_limit_bytes = 0;
};

std::unique_ptr<Runner> make_cpu_runner(const std::filesystem::path& model_dir,
                                        const CpuRunnerOptions& opt);

// This machine's RAM in bytes (MemTotal of /proc/meminfo), 0 if unknown.
uint64_t machine_memory_bytes();

}  // namespace tandem::model
