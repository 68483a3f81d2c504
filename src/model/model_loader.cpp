#include "model/model_loader.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "model/synthetic.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fs = std::filesystem;

namespace tandem::model {
namespace {

double gib(uint64_t b) {
  return double(b) / double(1ull << 30);
}

// "" when a GPU tandem can use is present, else why not.
std::string gpu_missing() {
#ifdef TANDEM_HAVE_CUDA
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device ({})", cudaGetErrorString(e));
  }
  for (int d = 0; d < count; ++d) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess &&
        major >= 8)
      return "";
  }
  return count == 0 ? "no CUDA device" : "no CUDA device of compute capability 8.0 or newer";
#else
  return "this build has no CUDA backend";
#endif
}

SamplingKnobs qwen3_thinking() {
  SamplingKnobs k;
  k.temperature = 0.6f;
  k.top_p = 0.95f;
  k.top_k = 20;
  return k;
}

SamplingKnobs qwen3_plain() {
  SamplingKnobs k;
  k.temperature = 0.7f;
  k.top_p = 0.8f;
  k.top_k = 20;
  return k;
}

bool near(float a, double b) {
  return std::fabs(double(a) - b) < 1e-6;
}

std::string quant_level(const ModelConfig& c, bool fp8_weights) {
  if (fp8_weights || c.fp8) return "FP8";
  if (c.dtype == "float16") return "F16";
  if (c.dtype == "float32") return "F32";
  return "BF16";
}

std::shared_ptr<const tok::Tokenizer> load_tok(const std::string& dir, bool required) {
  try {
    return tok::load_tokenizer(dir);
  } catch (const Error& e) {
    if (required) throw;
    spdlog::debug("no tokenizer for {}: {}", dir.empty() ? "the synthetic model" : dir, e.what());
    return nullptr;
  }
}

}  // namespace

GenerationDefaults read_generation_defaults(const fs::path& dir) {
  GenerationDefaults d;
  d.thinking = qwen3_thinking();
  d.plain = qwen3_plain();
  const fs::path p = dir / "generation_config.json";
  std::error_code ec;
  if (dir.empty() || !fs::exists(p, ec)) return d;
  auto g = nlohmann::json::parse(read_file(p), nullptr, false);
  if (!g.is_object()) {
    spdlog::warn("{}: not a JSON object; using Qwen3's recommended sampling", p.string());
    return d;
  }
  auto num = [&](const char* k, double def) {
    auto it = g.find(k);
    return it != g.end() && it->is_number() ? it->get<double>() : def;
  };
  SamplingKnobs k;
  const bool do_sample = g.value("do_sample", false);
  k.temperature = do_sample ? float(num("temperature", 1.0)) : 0.0f;
  k.top_p = float(num("top_p", 1.0));
  k.top_k = int32_t(num("top_k", 50));  // transformers' default when the file has none
  k.min_p = float(num("min_p", 0.0));
  k.repetition_penalty = float(num("repetition_penalty", 1.0));
  if (!(k.top_p > 0.0f && k.top_p <= 1.0f)) k.top_p = 1.0f;
  if (k.top_k < 0) k.top_k = 0;
  d.thinking = k;
  d.plain = k;
  // A hybrid Qwen3 ships its thinking values; its card gives others for non-thinking turns.
  if (do_sample && near(k.temperature, 0.6) && near(k.top_p, 0.95)) {
    d.plain.temperature = 0.7f;
    d.plain.top_p = 0.8f;
  }
  d.from_file = true;
  return d;
}

std::vector<int32_t> eos_token_ids(const ModelConfig& cfg, const fs::path& dir,
                                   const tok::Tokenizer* tok) {
  std::vector<int32_t> e(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
  const fs::path p = dir / "generation_config.json";
  std::error_code ec;
  if (!dir.empty() && fs::exists(p, ec)) {
    auto g = nlohmann::json::parse(read_file(p), nullptr, false);
    if (g.is_object() && g.contains("eos_token_id")) {
      auto& v = g["eos_token_id"];
      if (v.is_number_integer()) e.push_back(v.get<int32_t>());
      if (v.is_array())
        for (auto& x : v)
          if (x.is_number_integer()) e.push_back(x.get<int32_t>());
    }
  }
  if (tok)
    for (const char* t : {"<|im_end|>", "<|endoftext|>"})
      if (auto id = tok->find_token(t)) e.push_back(*id);
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  return e;
}

uint64_t cpu_weight_bytes(const ModelConfig& cfg) {
  const uint64_t wsize = cfg.dtype == "float32" ? 4 : 2;
  const uint64_t linear = cfg.fp8 ? uint64_t(cfg.num_linear_params()) : 0;
  return (uint64_t(cfg.num_params()) - linear) * wsize + linear * 4;
}

std::string choose_backend(const std::string& requested, const std::string& source) {
  const bool synthetic = is_synthetic(source);
  if (requested == "cpu") {
    if (synthetic)
      fail(ErrorKind::kUnsupported,
           "{} builds its random weights on the GPU; the CPU backend runs checkpoint folders",
           source);
    return "cpu";
  }
  if (requested == "cuda") {
#ifndef TANDEM_HAVE_CUDA
    fail(ErrorKind::kUnsupported, "this build has no CUDA backend (--backend cpu runs on the CPU)");
#endif
    return "cuda";
  }
  if (requested != "auto")
    fail(ErrorKind::kInvalidArgument, "unknown backend '{}' (auto, cpu or cuda)", requested);
  const std::string why = gpu_missing();
  if (why.empty() || synthetic) return "cuda";  // synthetic: the CUDA runner says what is wrong
  spdlog::info("{}: using the CPU backend", why);
  return "cpu";
}

LoadedModel load_model(const std::string& source, const LoaderOptions& opt) {
  LoadedModel m;
  m.source = source;
  const bool synthetic = is_synthetic(source);
  fs::path dir;
  if (synthetic) {
    m.config = synthetic_config(source);
    m.tokenizer = opt.tokenizer ? opt.tokenizer : load_tok("", opt.tokenizer_required);
  } else {
    std::error_code ec;
    if (!fs::is_directory(source, ec))
      fail(ErrorKind::kNotFound, "'{}' is not a folder (or use synthetic:qwen3-14b)", source);
    dir = source;
    m.config = load_config(dir);
    m.tokenizer = opt.tokenizer ? opt.tokenizer : load_tok(source, opt.tokenizer_required);
    for (auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") m.weight_bytes += fs::file_size(e.path(), ec);
  }
  m.defaults = read_generation_defaults(dir);
  m.eos_ids = eos_token_ids(m.config, dir, m.tokenizer.get());

  const std::string backend = choose_backend(opt.backend, source);
  if (backend == "cuda") {
    try {
      m.runner = make_cuda_runner(source, opt.cuda);
    } catch (const Error& e) {
      if (opt.backend != "auto" || synthetic) throw;
      fail(e.kind(),
           "the GPU cannot run this model: {}. tandem does not move it to the CPU by itself: "
           "--backend cpu runs it on the CPU (about {:.1f} GiB of RAM for the weights)",
           e.what(), gib(cpu_weight_bytes(m.config)));
    }
    m.backend = "cuda";
    m.quantization_level = quant_level(m.config, cuda_runner_stats(*m.runner).fp8_weights);
  } else {
    CpuRunnerOptions co = opt.cpu;
    if (co.max_model_len <= 0 && opt.cpu_default_max_len > 0)
      co.max_model_len = std::min(m.config.max_position_embeddings, opt.cpu_default_max_len);
    m.runner = make_cpu_runner(dir, co);
    m.backend = "cpu";
    m.quantization_level = quant_level(m.config, false);
  }
  return m;
}

}  // namespace tandem::model
