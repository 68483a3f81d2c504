#include "server/model_host.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "model/config.h"
#include "model/cpu_runner.h"
// The CUDA runner and synthetic models are optional parts of the model module.
#if __has_include("model/cuda_runner.h") && __has_include("model/synthetic.h")
#include "model/cuda_runner.h"
#include "model/synthetic.h"
#define TANDEM_SERVER_HAS_CUDA_RUNNER 1
#else
#define TANDEM_SERVER_HAS_CUDA_RUNNER 0
#endif

namespace tandem::server {

namespace fs = std::filesystem;

std::unique_ptr<ModelHost> load_model_host(const ModelHostOptions& opt) {
  auto host = std::make_unique<ModelHost>();
  ServerContext& ctx = host->ctx;
#if TANDEM_SERVER_HAS_CUDA_RUNNER
  const bool synthetic = model::is_synthetic(opt.model);
#else
  const bool synthetic = false;
#endif
  std::string default_name;
  if (synthetic) {
#if TANDEM_SERVER_HAS_CUDA_RUNNER
    ctx.model.config = model::synthetic_config(opt.model);
    default_name = opt.model.substr(std::string(model::kSyntheticPrefix).size());
    ctx.tok = tok::load_tokenizer("");
#endif
  } else {
    if (!fs::is_directory(opt.model))
      fail(ErrorKind::kNotFound, "--model '{}' is not a folder (or use synthetic:qwen3-14b)",
           opt.model);
    ctx.model.config = model::load_config(opt.model);
    fs::path p = fs::weakly_canonical(fs::path(opt.model));
    default_name = p.filename().string();
    if (default_name.empty()) default_name = p.parent_path().filename().string();
    ctx.tok = tok::load_tokenizer(opt.model);
    for (auto& e : fs::directory_iterator(opt.model))
      if (e.path().extension() == ".safetensors") ctx.model.size_bytes += e.file_size();
  }
  ctx.model.names =
      opt.served_names.empty() ? std::vector<std::string>{default_name} : opt.served_names;
  ctx.model.source = opt.model;
  ctx.opt = opt.server;

  std::unique_ptr<model::Runner> runner;
  std::string backend = opt.backend;
#if TANDEM_SERVER_HAS_CUDA_RUNNER
  if (backend == "auto" || backend == "cuda") {
    model::CudaRunnerOptions co;
    co.max_model_len = opt.max_model_len;
    co.gpu_memory_utilization = opt.gpu_memory_utilization;
    co.kv_cache_dtype = model::parse_kv_cache_dtype(opt.kv_cache_dtype);
    co.weight_dtype = model::parse_weight_dtype(opt.quantization);
    try {
      runner = model::make_cuda_runner(opt.model, co);
      backend = "cuda";
      if (model::cuda_runner_stats(*runner).fp8_weights) ctx.model.quantization_level = "FP8";
    } catch (const Error& e) {
      if (backend == "cuda" || synthetic) throw;
      spdlog::info("CUDA backend unavailable ({}); using the CPU backend", e.what());
    }
  }
#else
  if (backend == "cuda") fail(ErrorKind::kUnsupported, "this build has no CUDA runner");
#endif
  if (!runner) {
    model::CpuRunnerOptions co;
    co.threads = opt.threads;
    co.kv_cache_dtype = model::parse_kv_cache_dtype(opt.kv_cache_dtype);
    co.weight_dtype = model::parse_weight_dtype(opt.quantization);
    // The CPU backend sizes its KV cache for max_model_len; keep it modest by default.
    co.max_model_len = opt.max_model_len > 0
                           ? opt.max_model_len
                           : std::min(ctx.model.config->max_position_embeddings, 8192);
    runner = model::make_cpu_runner(opt.model, co);
    backend = "cpu";
    if (ctx.model.config && ctx.model.config->fp8) ctx.model.quantization_level = "FP8";
  }
  ctx.model.backend = backend;

  engine::EngineOptions eo;
  eo.max_num_seqs = opt.max_num_seqs;
  eo.max_num_batched_tokens = std::max(opt.max_num_batched_tokens, opt.max_num_seqs);
  eo.max_model_len = opt.max_model_len;
  eo.decode_step_tokens = opt.decode_step_tokens;
  eo.ttft_target_ms = opt.ttft_target_ms;
  for (int id : ctx.model.config->eos_token_ids) eo.eos_ids.push_back(id);
  for (const char* t : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = ctx.tok->find_token(t)) eo.eos_ids.push_back(*id);
  std::sort(eo.eos_ids.begin(), eo.eos_ids.end());
  eo.eos_ids.erase(std::unique(eo.eos_ids.begin(), eo.eos_ids.end()), eo.eos_ids.end());
  ctx.eos_ids = eo.eos_ids;
  host->gen = wrap_engine(std::make_unique<engine::Engine>(std::move(runner), eo));
  ctx.gen = host->gen.get();
  return host;
}

}  // namespace tandem::server
