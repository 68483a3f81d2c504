#include "server/model_host.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "model/model_loader.h"
#include "model/synthetic.h"

namespace tandem::server {

namespace fs = std::filesystem;

std::unique_ptr<ModelHost> load_model_host(const ModelHostOptions& opt) {
  auto host = std::make_unique<ModelHost>();
  ServerContext& ctx = host->ctx;

  // The one loader picks the backend (no quiet CPU fallback), the EOS ids and the defaults.
  model::LoaderOptions lo;
  lo.backend = opt.backend;
  lo.cuda.max_model_len = opt.max_model_len;
  lo.cuda.gpu_memory_utilization = opt.gpu_memory_utilization;
  lo.cuda.kv_cache_dtype = model::parse_kv_cache_dtype(opt.kv_cache_dtype);
  lo.cuda.weight_dtype = model::parse_weight_dtype(opt.quantization);
  lo.cpu.threads = opt.threads;
  lo.cpu.kv_cache_dtype = lo.cuda.kv_cache_dtype;
  lo.cpu.weight_dtype = lo.cuda.weight_dtype;
  lo.cpu.max_model_len = opt.max_model_len;
  lo.cpu.memory_limit_bytes = opt.cpu_memory_limit_bytes;
  model::LoadedModel m = model::load_model(opt.model, lo);

  std::string default_name;
  if (model::is_synthetic(opt.model)) {
    default_name = opt.model.substr(opt.model.find(':') + 1);
  } else {
    fs::path p = fs::weakly_canonical(fs::path(opt.model));
    default_name = p.filename().string();
    if (default_name.empty()) default_name = p.parent_path().filename().string();
  }
  ctx.model.names =
      opt.served_names.empty() ? std::vector<std::string>{default_name} : opt.served_names;
  ctx.model.source = opt.model;
  ctx.model.config = m.config;
  ctx.model.size_bytes = m.weight_bytes;
  ctx.model.backend = m.backend;
  ctx.model.quantization_level = m.quantization_level;
  ctx.model.defaults = m.defaults;
  ctx.tok = m.tokenizer;
  ctx.opt = opt.server;

  engine::EngineOptions eo;
  eo.max_num_seqs = opt.max_num_seqs;
  eo.max_num_batched_tokens = std::max(opt.max_num_batched_tokens, opt.max_num_seqs);
  eo.max_model_len = opt.max_model_len;
  eo.decode_step_tokens = opt.decode_step_tokens;
  eo.ttft_target_ms = opt.ttft_target_ms;
  eo.enable_prefix_caching = opt.enable_prefix_caching;
  eo.eos_ids.assign(m.eos_ids.begin(), m.eos_ids.end());
  ctx.eos_ids = eo.eos_ids;
  host->gen = wrap_engine(std::make_unique<engine::Engine>(std::move(m.runner), eo));
  ctx.gen = host->gen.get();
  return host;
}

}  // namespace tandem::server
