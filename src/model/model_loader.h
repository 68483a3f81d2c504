#pragma once
// The one model loader (docs/MODELS.md, "Loading"): what `serve`, `run`, `generate` and
// `bench` all go through to turn a checkpoint folder (or synthetic:NAME) into a config, a
// tokenizer, a runner on a backend, the EOS ids and the default sampling.
//
// Backend choice. `cpu` and `cuda` are what they say. `auto` is the GPU when this build has
// CUDA and the machine a usable GPU (compute capability 8.0+), else the CPU. It never falls
// back to the CPU on its own: when there is a GPU and it cannot run the model (shapes, FP8
// on a GPU without FP8 GEMMs, not enough memory), loading stops with the GPU's reason and
// the flag that runs the model on the CPU instead, with the RAM that would take.
//
// EOS ids: config.json's eos_token_id, generation_config.json's, and the tokenizer's
// <|im_end|> and <|endoftext|>. Sampling defaults: generation_config.json (do_sample false
// means greedy), for requests that think; for requests that do not, Qwen3's recommended
// non-thinking values (temperature 0.7, top_p 0.8) when the file holds the hybrid Qwen3
// thinking values (0.6, 0.95), else the file's values too.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/sampling_knobs.h"
#include "model/config.h"
#include "model/cpu_runner.h"
#include "model/cuda_runner.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

namespace tandem::model {

struct GenerationDefaults {
  SamplingKnobs thinking;  // requests that think
  SamplingKnobs plain;     // requests that do not (and completions without a template)
  bool from_file = false;  // generation_config.json was there
};

// From DIR/generation_config.json; Qwen3's recommended values when there is none.
GenerationDefaults read_generation_defaults(const std::filesystem::path& dir);

struct LoaderOptions {
  std::string backend = "auto";  // auto | cpu | cuda
  CpuRunnerOptions cpu;
  CudaRunnerOptions cuda;
  // CPU: cap the context at this when cpu.max_model_len is 0 (the CPU sizes its KV cache
  // for the context; 0: the model's own).
  int cpu_default_max_len = 8192;
  // A tokenizer the caller loaded already (it is the folder's); null: load it.
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  // false: a model without a loadable tokenizer still loads (benchmarks feed token ids);
  // LoadedModel::tokenizer is then null.
  bool tokenizer_required = true;
};

struct LoadedModel {
  std::string source;  // the folder, or synthetic:NAME
  ModelConfig config;
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  std::unique_ptr<Runner> runner;
  std::string backend;             // "cpu" or "cuda"
  std::string quantization_level;  // the products' weights as served: BF16, F16, F32, FP8
  uint64_t weight_bytes = 0;       // of the safetensors files (0 for synthetic)
  std::vector<int32_t> eos_ids;    // sorted, unique
  GenerationDefaults defaults;
};

// "cuda" or "cpu": what `requested` (auto, cpu, cuda) means on this machine for `source`.
// Throws Error(kUnsupported) for cuda in a build without it, or a synthetic model on the CPU.
std::string choose_backend(const std::string& requested, const std::string& source);

// The EOS ids of a model folder (see above); `tok` may be null.
std::vector<int32_t> eos_token_ids(const ModelConfig& cfg, const std::filesystem::path& dir,
                                   const tok::Tokenizer* tok);

// The RAM the CPU backend needs for the weights of `cfg` (FP8 linear weights as float32).
uint64_t cpu_weight_bytes(const ModelConfig& cfg);

// Loads everything. Throws tandem::Error naming what is wrong (missing folder, bad config,
// no fit on the device, the GPU's reason with the CPU flag).
LoadedModel load_model(const std::string& source, const LoaderOptions& opt);

}  // namespace tandem::model
