// tandem bench: offline benchmark of the model forward on the CUDA backend (no HTTP, no
// engine): batch-1 decode, prefill at several prompt lengths, batched decode, and mixed steps
// (a decode batch plus one prefill chunk, as the engine's scheduler builds them). Each figure
// comes with its ratio to the GPU's ceilings (HBM bandwidth for decode, bf16 tensor-core
// rate for prefill), measured on the project's H200: 4.24 TB/s and 777 TFLOP/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/version.h"
#include "engine/engine_bench.h"
#include "model/config.h"
#include "model/cpu_runner.h"
#include "model/cuda_runner.h"
#include "model/model_loader.h"
#include "model/synthetic.h"
#ifdef TANDEM_HAVE_CUDA
#include "backend/cuda/gpu_monitor.h"
#endif

namespace {

using tandem::model::ForwardBatch;
using tandem::model::Runner;

struct Opts {
  std::string model = "synthetic:qwen3-14b";
  bool json = false;
  std::string sections = "decode1,prefill,batch";
  int context = 512;
  int decode_steps = 64;
  std::vector<int> prefill = {512, 4096, 32768};
  std::vector<int> batches = {8, 32, 64, 128, 256};
  int mixed_decodes = 64, mixed_reps = 9;
  bool mixed_vary = false, argmax = false;
  std::vector<int> mixed_prefill = {0, 16, 32, 64, 96, 128, 160, 192, 256, 384, 512};
  double gpu_mem = 0.90;
  std::string kv_dtype = "bf16";
  std::string quantization = "auto";
  int gemv_max_tokens = 1;
  bool no_graphs = false;
  int max_num_tokens = 8192;
  bool host_logits = false;
  double bw_ceiling = 4.24e12, flops_ceiling = 777e12;
  // Engine mode (--concurrency): closed-loop clients through the scheduler and step loop.
  std::vector<int> concurrency;
  int prompt_len = 400, output_len = 256, requests_per_client = 2;
  int shared_prefix = 0, question_len = 32;
  int max_num_batched_tokens = 8192, max_num_seqs = 256;
  int decode_step_tokens = -1;
  double ttft_target_ms = 300, ramp_ms = 0;
  std::string backend = "cuda";
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  bool host_sampling = false;
};

struct Row {
  std::string name;
  double tok_s = 0, ms = 0;
  double bytes = 0, flops = 0;  // per timed step
  std::string ceiling;          // "bw" or "flops"
  double ratio = 0;
  // The GPU while the row was timed (gpu_samples 0: not known).
  int gpu_samples = 0;
  unsigned sm_mhz = 0;
  double power_w = 0, power_capped = 0;
};

// SM clock and power during each timed part (NVML, when the driver's library is there).
class GpuWatch {
 public:
  GpuWatch() {
#ifdef TANDEM_HAVE_CUDA
    mon_ = std::make_unique<tandem::cuda::GpuMonitor>(-1);
#endif
  }
  size_t mark() const {
#ifdef TANDEM_HAVE_CUDA
    return mon_->mark();
#else
    return 0;
#endif
  }
  void fill(Row& r, size_t mark) const {
#ifdef TANDEM_HAVE_CUDA
    const auto w = mon_->since(mark);
    r.gpu_samples = w.samples;
    r.sm_mhz = w.sm_mhz_p50;
    r.power_w = w.power_w_p50;
    r.power_capped = w.power_cap_share;
#else
    (void)r, (void)mark;
#endif
  }
  // "SM 1710 MHz (1545-1965), 693 W (max 697) of 700 W, power-capped 88%" over the samples
  // after `mark`, or why it is not known.
  std::string describe(size_t mark) const {
    const std::string why = missing();
    if (!why.empty()) return "not known (" + why + ")";
#ifdef TANDEM_HAVE_CUDA
    const std::string d = mon_->since(mark).describe();
    return d.empty() ? "not known (no samples)" : d;
#else
    (void)mark;
    return "";
#endif
  }
  // Why there are no samples ("" when there are).
  std::string missing() const {
#ifdef TANDEM_HAVE_CUDA
    return mon_->available() ? "" : mon_->why();
#else
    return "a build without CUDA";
#endif
  }
  // " (instant power)", " (power: the driver's 1-s mean)" or " (not known: why)".
  std::string power_note() const {
    if (!missing().empty()) return " (not known: " + missing() + ")";
#ifdef TANDEM_HAVE_CUDA
    return mon_->instant_power() ? " (instant power)" : " (power: the driver's 1-s mean)";
#else
    return "";
#endif
  }
  double power_limit_w() const {
#ifdef TANDEM_HAVE_CUDA
    return mon_->power_limit_w();
#else
    return 0;
#endif
  }

 private:
#ifdef TANDEM_HAVE_CUDA
  std::unique_ptr<tandem::cuda::GpuMonitor> mon_;
#endif
};

// Model arithmetic for the ceilings.
struct Costs {
  double linear_params = 0;  // per token: every linear layer of the body
  double kv_bytes_per_token = 0;
  double attn_flops_per_key = 0;  // q.k and p.v for one (query, key) pair, all layers
  double lm_head_params = 0;
};

Costs costs_of(const tandem::model::ModelConfig& c) {
  Costs k;
  const double H = c.hidden_size, I = c.intermediate_size, Q = c.q_size(), KV = c.kv_size();
  k.linear_params = c.num_hidden_layers * (H * (Q + 2 * KV) + Q * H + 3 * H * I);
  k.kv_bytes_per_token = c.num_hidden_layers * 2.0 * KV * 2.0;
  k.attn_flops_per_key = c.num_hidden_layers * 4.0 * Q;
  k.lm_head_params = double(c.vocab_size) * H;
  return k;
}

// The model work a closed-loop level did each second: products (prompt rows, decode rows and
// each output token's lm_head row), attention, and KV bytes read by decode, from its output
// rate (the steady window's where there is one) and the request shape. Against the bf16
// peak it says how much of the GPU the level used; under a power cap the products alone
// sustain less than the peak (PERFORMANCE.md: SustainedProductTiming).
std::string engine_work_line(const tandem::engine::EngineBenchRow& r, const Costs& k,
                             int prompt_len, int output_len, double flops_ceiling) {
  const double rate = r.steady_tok_s > 0 ? r.steady_tok_s : r.output_tok_s;
  const double P = prompt_len, O = output_len;
  // Per request: P prompt rows and O - 1 decode rows through the body, O lm_head rows;
  // causal attention over the prompt, then decode row i reads P + i keys.
  const double keys_decode = (O - 1) * P + (O - 1) * O / 2;
  const double flops = 2.0 * k.linear_params * (P + O - 1) + 2.0 * k.lm_head_params * O +
                       k.attn_flops_per_key * (P * (P + 1) / 2 + keys_decode);
  const double kv_bytes = k.kv_bytes_per_token * keys_decode;
  return fmt::format(
      "C={}: {:.0f} TFLOP/s of model work ({:.2f} of the bf16 peak, {:.0f}), {:.2f} TB/s of KV "
      "reads, at {:.0f} tok/s{}",
      r.concurrency, rate * flops / O / 1e12, rate * flops / O / flops_ceiling,
      flops_ceiling / 1e12, rate * kv_bytes / O / 1e12, rate,
      r.steady_tok_s > 0 ? " (steady window)" : "");
}

// `tandem bench --concurrency ...`: the serving engine under C concurrent clients (no HTTP).
int run_engine_mode(const Opts& o) {
  tandem::engine::EngineBenchOptions eo;
  eo.concurrency = o.concurrency;
  eo.prompt_len = o.prompt_len;
  eo.output_len = o.output_len;
  eo.requests_per_client = o.requests_per_client;
  eo.shared_prefix_len = o.shared_prefix;
  eo.question_len = o.question_len;
  eo.engine.max_num_batched_tokens = o.max_num_batched_tokens;
  eo.engine.max_num_seqs = o.max_num_seqs;
  eo.engine.decode_step_tokens = o.decode_step_tokens;
  eo.engine.ttft_target_ms = o.ttft_target_ms;
  eo.ramp_ms = o.ramp_ms;
  eo.temperature = o.temperature;
  eo.top_p = o.top_p;
  eo.top_k = o.top_k;
  eo.host_sampling = o.host_sampling;
  const int longest =
      (o.shared_prefix > 0 ? o.shared_prefix + o.question_len : o.prompt_len) + o.output_len + 64;
  std::unique_ptr<Runner> runner;
  if (o.backend == "cpu") {
    tandem::model::CpuRunnerOptions ro;
    ro.max_model_len = longest;
    int maxc = *std::max_element(o.concurrency.begin(), o.concurrency.end());
    ro.num_blocks = (longest + 15) / 16 * std::max(maxc, 4) + 16;
    ro.kv_cache_dtype = tandem::model::parse_kv_cache_dtype(o.kv_dtype);
    ro.weight_dtype = tandem::model::parse_weight_dtype(o.quantization);
    tandem::model::LoaderOptions lo;
    lo.backend = "cpu";
    lo.tokenizer_required = false;
    lo.cpu = ro;
    runner = tandem::model::load_model(o.model, lo).runner;
  } else {
    tandem::model::CudaRunnerOptions ro;
    ro.gpu_memory_utilization = o.gpu_mem;
    ro.max_model_len = longest;
    ro.max_num_tokens = o.max_num_batched_tokens;
    ro.kv_cache_dtype = tandem::model::parse_kv_cache_dtype(o.kv_dtype);
    ro.weight_dtype = tandem::model::parse_weight_dtype(o.quantization);
    ro.cuda_graphs = !o.no_graphs;
    ro.gemv_max_tokens = o.gemv_max_tokens;
    tandem::model::LoaderOptions lo;
    lo.backend = "cuda";
    lo.tokenizer_required = false;
    lo.cuda = ro;
    runner = tandem::model::load_model(o.model, lo).runner;
  }
  fmt::print("tandem bench (engine): {} on {}, prompt {} + output {} tokens{}, {} {} KV blocks\n",
             o.model, runner->name(),
             o.shared_prefix > 0 ? o.shared_prefix + o.question_len : o.prompt_len, o.output_len,
             o.shared_prefix > 0 ? fmt::format(" (shared prefix {})", o.shared_prefix) : "",
             runner->kv_layout().num_blocks,
             tandem::model::kv_cache_dtype_name(runner->kv_layout().dtype));
  const int knee = tandem::engine::effective_decode_step_tokens(eo.engine, *runner);
  fmt::print("scheduling: {} tokens per step at most; {}; clients start {}\n",
             o.max_num_batched_tokens,
             knee > 0 ? fmt::format("decode steps carry prefill up to {} tokens while prompts "
                                    "meet a {} ms TTFT target",
                                    knee, o.ttft_target_ms)
                      : std::string("prefill always fills the budget"),
             o.ramp_ms > 0 ? fmt::format("over {} ms", o.ramp_ms) : std::string("together"));
  if (o.temperature > 0.0f)
    fmt::print("sampling: temperature {} top_p {} top_k {}, on the {}\n", o.temperature, o.top_p,
               o.top_k, o.host_sampling || !runner->supports_sampling() ? "host" : "runner (GPU)");
  if (o.backend == "cpu") {
    const auto rows = tandem::engine::run_engine_bench(*runner, eo);
    fmt::print("{}", tandem::engine::format_engine_bench(rows));
    return 0;
  }
  // On the GPU, one level at a time, each with the SM clock and power it ran at.
  GpuWatch gpu;
  std::vector<tandem::engine::EngineBenchRow> rows;
  std::vector<std::string> notes;
  for (int c : o.concurrency) {
    eo.concurrency = {c};
    const size_t mark = gpu.mark();
    for (auto& r : tandem::engine::run_engine_bench(*runner, eo)) rows.push_back(r);
    notes.push_back(fmt::format("C={}: {}", c, gpu.describe(mark)));
  }
  fmt::print("{}", tandem::engine::format_engine_bench(rows));
  fmt::print("\nGPU during each level (medians of 20-ms NVML samples{})\n", gpu.power_note());
  for (const auto& n : notes) fmt::print("{}\n", n);
  if (o.shared_prefix == 0) {
    const Costs k =
        costs_of(tandem::model::is_synthetic(o.model) ? tandem::model::synthetic_config(o.model)
                                                      : tandem::model::load_config(o.model));
    fmt::print("\nwork done at each level's rate\n");
    for (const auto& r : rows)
      fmt::print("{}\n", engine_work_line(r, k, o.prompt_len, o.output_len, o.flops_ceiling));
  }
  return 0;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Block ids: sequence s owns blocks [s * per_seq, (s + 1) * per_seq).
// `scatter` (optional) maps those ids to others, e.g. spread over the whole cache as in an
// engine that has been running a while.
ForwardBatch make_batch(const std::vector<int>& prev_ctx, const std::vector<int>& new_rows,
                        int block_size, int per_seq, tandem::Rng& rng,
                        const std::vector<int32_t>* scatter = nullptr) {
  auto blk = [&](int64_t id) { return scatter ? int64_t((*scatter)[size_t(id)]) : id; };
  ForwardBatch b;
  b.query_start.push_back(0);
  b.max_blocks = per_seq;
  for (size_t s = 0; s < prev_ctx.size(); ++s) {
    for (int i = 0; i < new_rows[s]; ++i) {
      const int p = prev_ctx[s] + i;
      b.tokens.push_back(int32_t(rng.next() % 151643));
      b.positions.push_back(p);
      b.slot_mapping.push_back(blk(int64_t(s) * per_seq + p / block_size) * block_size +
                               p % block_size);
    }
    b.query_start.push_back(int(b.tokens.size()));
    b.context_lens.push_back(prev_ctx[s] + new_rows[s]);
    b.logit_rows.push_back(int(b.tokens.size()) - 1);
    for (int i = 0; i < per_seq; ++i) b.block_tables.push_back(int32_t(blk(s * per_seq + i)));
  }
  return b;
}

class Bench {
 public:
  Bench(const Opts& o) : o_(o) {
    tandem::model::CudaRunnerOptions ro;
    ro.gpu_memory_utilization = o.gpu_mem;
    ro.cuda_graphs = !o.no_graphs;
    ro.gemv_max_tokens = o.gemv_max_tokens;
    ro.max_num_tokens = o.max_num_tokens;
    ro.kv_cache_dtype = tandem::model::parse_kv_cache_dtype(o.kv_dtype);
    ro.weight_dtype = tandem::model::parse_weight_dtype(o.quantization);
    int longest = o.context + o.decode_steps + 16;
    for (int p : o.prefill) longest = std::max(longest, p + 1);
    ro.max_model_len = longest;
    cfg_ = tandem::model::is_synthetic(o.model) ? tandem::model::synthetic_config(o.model)
                                                : tandem::model::load_config(o.model);
    tandem::model::LoaderOptions lo;
    lo.backend = "cuda";
    lo.tokenizer_required = false;
    lo.cuda = ro;
    runner_ = tandem::model::load_model(o.model, lo).runner;
    stats_ = tandem::model::cuda_runner_stats(*runner_);
    costs_ = costs_of(cfg_);
    bs_ = runner_->kv_layout().block_size;
  }

  void run_forward(const ForwardBatch& b) {
    if (o_.argmax) {
      tokens_.resize(b.logit_rows.size());
      runner_->forward_greedy(b, tokens_);
    } else if (o_.host_logits) {
      logits_.resize(b.logit_rows.size() * size_t(runner_->vocab_size()));
      runner_->forward(b, logits_);
    } else {
      runner_->forward(b, {});  // logits stay on the GPU: the model alone is timed
    }
  }

  int per_seq(int tokens) const { return (tokens + bs_ - 1) / bs_; }

  // Median wall time of `reps` forwards, each over the batch make(i) builds before the clock.
  template <class Make>
  double median_s(int reps, Make make) {
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      const ForwardBatch b = make(i);
      const double t0 = now_s();
      run_forward(b);
      times.push_back(now_s() - t0);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  void decode(int B, int ctx, int steps, const std::string& name) {
    const int ps = per_seq(ctx + steps + 1);
    if (int64_t(B) * ps > runner_->kv_layout().num_blocks) {
      fmt::print(stderr, "bench: skipping {}: the KV cache holds {} blocks, {} needed\n", name,
                 runner_->kv_layout().num_blocks, int64_t(B) * ps);
      return;
    }
    // The context is taken as already cached (its K/V values do not change the work done).
    std::vector<int> c(B, ctx), one(B, 1);
    for (int w = 0; w < 3; ++w) run_forward(make_batch(c, one, bs_, ps, rng_));  // graphs
    std::vector<ForwardBatch> batches;
    for (int i = 0; i < steps; ++i) {
      batches.push_back(make_batch(c, one, bs_, ps, rng_));
      for (auto& x : c) ++x;
    }
    const size_t gm = gpu_.mark();
    const double t0 = now_s();
    for (auto& b : batches) run_forward(b);
    const double dt = (now_s() - t0) / steps;
    Row r;
    gpu_.fill(r, gm);
    r.name = name;
    r.ms = dt * 1e3;
    r.tok_s = B / dt;
    const double mean_ctx = ctx + steps / 2.0;
    r.bytes = double(stats_.step_weight_bytes) + B * mean_ctx * costs_.kv_bytes_per_token;
    r.flops = 2.0 * B * (costs_.linear_params + costs_.lm_head_params) +
              B * mean_ctx * costs_.attn_flops_per_key;
    r.ceiling = "bw";
    r.ratio = r.bytes / dt / o_.bw_ceiling;
    rows_.push_back(r);
  }

  void prefill(int T) {
    const int ps = per_seq(T);
    std::vector<int> zero = {0}, rows = {T};
    run_forward(make_batch(zero, {std::min(T, 512)}, bs_, ps, rng_));  // warm-up
    const int reps = T <= 1024 ? 5 : T <= 8192 ? 3 : 1;
    const size_t gm = gpu_.mark();
    const double dt = median_s(reps, [&](int) { return make_batch(zero, rows, bs_, ps, rng_); });
    Row r;
    gpu_.fill(r, gm);
    r.name = fmt::format("prefill {}", T);
    r.ms = dt * 1e3;
    r.tok_s = T / dt;
    r.flops = 2.0 * T * costs_.linear_params + 2.0 * costs_.lm_head_params +
              costs_.attn_flops_per_key * (double(T) * (T + 1) / 2);
    r.bytes = double(stats_.step_weight_bytes) + T * costs_.kv_bytes_per_token;
    r.ceiling = "flops";
    r.ratio = r.flops / dt / o_.flops_ceiling;
    rows_.push_back(r);
  }

  // One step of B decodes (at `ctx` cached tokens) plus a P-token prefill chunk of a fresh
  // sequence: the step the scheduler builds when prompts arrive during decoding. Its cost
  // against P is what a prompt costs the users decoding beside it.
  void mixed(int B, int ctx, int P) {
    const int ps = per_seq(std::max(ctx + 129, P));  // room for --mixed-vary contexts
    if (int64_t(B + 1) * ps > runner_->kv_layout().num_blocks) return;
    std::vector<int> c(size_t(B), ctx), rows(size_t(B), 1);
    if (P > 0) {
      c.push_back(0);
      rows.push_back(P);
    }
    std::vector<int32_t> scatter;
    if (o_.mixed_vary) {  // blocks spread over the whole cache
      scatter.resize(size_t(runner_->kv_layout().num_blocks));
      for (size_t i = 0; i < scatter.size(); ++i) scatter[i] = int32_t(i);
      for (size_t i = scatter.size() - 1; i > 0; --i)
        std::swap(scatter[i], scatter[size_t(rng_.next() % (i + 1))]);
    }
    const auto* sc = o_.mixed_vary ? &scatter : nullptr;
    for (int w = 0; w < 2; ++w) run_forward(make_batch(c, rows, bs_, ps, rng_, sc));
    if (o_.mixed_vary)  // decode contexts spread over ctx +- 128, as in a running engine
      for (int s = 0; s < B; ++s) c[size_t(s)] = std::max(1, ctx - 128 + (s * 37) % 256);
    const size_t gm = gpu_.mark();
    const double dt = median_s(o_.mixed_reps, [&](int i) {
      if (o_.mixed_vary && P > 0) rows.back() = std::max(1, P - (i % 8));  // a new size each step
      return make_batch(c, rows, bs_, ps, rng_, sc);
    });
    Row r;
    gpu_.fill(r, gm);
    r.name = fmt::format("mixed b={} +{}", B, P);
    r.ms = dt * 1e3;
    r.tok_s = (B + P) / dt;
    r.flops = 2.0 * (B + P) * costs_.linear_params + 2.0 * (B + (P > 0)) * costs_.lm_head_params +
              B * double(ctx) * costs_.attn_flops_per_key +
              costs_.attn_flops_per_key * (double(P) * (P + 1) / 2);
    r.bytes = double(stats_.step_weight_bytes) + B * double(ctx) * costs_.kv_bytes_per_token;
    r.ceiling = "bw";
    r.ratio = r.bytes / dt / o_.bw_ceiling;
    rows_.push_back(r);
  }

  void run() {
    auto has = [&](const char* s) { return o_.sections.find(s) != std::string::npos; };
    if (has("decode1"))
      decode(1, o_.context, o_.decode_steps, fmt::format("decode b=1 ctx={}", o_.context));
    if (has("prefill"))
      for (int T : o_.prefill) prefill(T);
    if (has("batch"))
      for (int B : o_.batches)
        decode(B, o_.context, std::max(8, o_.decode_steps / 4),
               fmt::format("decode b={} ctx={}", B, o_.context));
    if (has("mixed"))
      for (int P : o_.mixed_prefill) mixed(o_.mixed_decodes, o_.context, P);
  }

  void print() const {
    const double gib = double(1ull << 30);
    if (o_.json) {
      std::string s = fmt::format(
          "{{\"model\":\"{}\",\"device\":\"{}\",\"version\":\"{}\",\"weights\":\"{}\","
          "\"weights_gib\":{:.3f},"
          "\"step_weight_bytes\":{},\"graphs\":{},\"gemv_max_tokens\":{},\"host_logits\":{},"
          "\"ceilings\":{{\"hbm_bytes_per_s\":{},\"bf16_flops_per_s\":{}}},\"results\":[",
          o_.model, stats_.device_name, TANDEM_VERSION, stats_.fp8_weights ? "fp8" : "bf16",
          stats_.weight_bytes / gib, stats_.step_weight_bytes, !o_.no_graphs, o_.gemv_max_tokens,
          o_.host_logits, o_.bw_ceiling, o_.flops_ceiling);
      for (size_t i = 0; i < rows_.size(); ++i) {
        const Row& r = rows_[i];
        s += fmt::format(
            "{}{{\"name\":\"{}\",\"tok_per_s\":{:.2f},\"ms_per_step\":{:.4f},\"bytes\":{:.0f},"
            "\"flops\":{:.0f},\"achieved_bytes_per_s\":{:.4g},\"achieved_flops_per_s\":{:.4g},"
            "\"ceiling\":\"{}\",\"ratio\":{:.4f},\"gpu_samples\":{},\"sm_mhz_p50\":{},"
            "\"power_w_p50\":{:.1f},\"power_capped_share\":{:.3f}}}",
            i ? "," : "", r.name, r.tok_s, r.ms, r.bytes, r.flops, r.bytes / (r.ms / 1e3),
            r.flops / (r.ms / 1e3), r.ceiling, r.ratio, r.gpu_samples, r.sm_mhz, r.power_w,
            r.power_capped);
      }
      fmt::print("{}]}}\n", s);
      return;
    }
    fmt::print(
        "tandem bench: {} on {} ({} SMs), {} weights {:.2f} GiB, graphs {}, gemv <= {} rows, "
        "logits {}\n",
        o_.model, stats_.device_name, stats_.num_sms, stats_.fp8_weights ? "fp8" : "bf16",
        stats_.weight_bytes / gib, o_.no_graphs ? "off" : "on", o_.gemv_max_tokens,
        o_.host_logits ? "copied to host" : "kept on GPU");
    fmt::print("{:<22} {:>11} {:>10} {:>10} {:>11}  {:<24} {:>7} {:>6}\n", "case", "tok/s",
               "ms/step", "TB/s", "TFLOP/s", "ratio to ceiling", "SM MHz", "W");
    for (const Row& r : rows_) {
      const double dt = r.ms / 1e3;
      const std::string ratio =
          fmt::format("{:.3f} of {}", r.ratio,
                      r.ceiling == "bw" ? fmt::format("{:.2f} TB/s", o_.bw_ceiling / 1e12)
                                        : fmt::format("{:.0f} TFLOP/s", o_.flops_ceiling / 1e12));
      const std::string gpu = r.gpu_samples
                                  ? fmt::format("{:>7} {:>6.0f}{}", r.sm_mhz, r.power_w,
                                                r.power_capped >= 0.5 ? " power-capped" : "")
                                  : fmt::format("{:>7} {:>6}", "-", "-");
      fmt::print("{:<22} {:>11.1f} {:>10.3f} {:>10.2f} {:>11.1f}  {:<24} {}\n", r.name, r.tok_s,
                 r.ms, r.bytes / dt / 1e12, r.flops / dt / 1e12, ratio, gpu);
    }
    const double limit = gpu_.power_limit_w();
    fmt::print(
        "SM clock and board power: medians of 20-ms NVML samples over each timed part{}{}; "
        "\"power-capped\": the driver held the clock for power in most of them\n",
        gpu_.power_note(),
        limit > 0 ? fmt::format(", power limit {:.0f} W", limit) : std::string());
  }

 private:
  Opts o_;
  tandem::model::ModelConfig cfg_;
  std::unique_ptr<Runner> runner_;
  tandem::model::CudaRunnerStats stats_;
  Costs costs_;
  int bs_ = 16;
  tandem::Rng rng_{12345};
  std::vector<float> logits_;
  std::vector<tandem::model::TokenId> tokens_;
  std::vector<Row> rows_;
  GpuWatch gpu_;
};

}  // namespace

using tandem::cli::ranged_option;

TANDEM_COMMAND(
    bench, 40, "Offline benchmark of the model forward on the GPU (no HTTP)",
    [](CLI::App& sub) -> tandem::cli::RunFn {
      auto o = std::make_shared<Opts>();
      sub.add_option("--model", o->model,
                     "Checkpoint folder or synthetic:qwen3-{0.6b,1.7b,4b,8b,14b,32b}")
          ->capture_default_str();
      sub.add_flag("--json", o->json, "Print one JSON object instead of a table");
      sub.add_option("--sections", o->sections, "Comma list of decode1, prefill, batch, mixed")
          ->capture_default_str();
      ranged_option(sub, "--context", o->context, "Cached tokens before decode steps", 1, 1 << 20);
      ranged_option(sub, "--decode-steps", o->decode_steps, "Timed batch-1 decode steps", 1,
                    100000);
      sub.add_option("--prefill", o->prefill, "Prompt lengths to prefill")
          ->delimiter(',')
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--batches", o->batches, "Decode batch sizes")
          ->delimiter(',')
          ->check(CLI::Range(1, 4096));
      ranged_option(sub, "--mixed-decodes", o->mixed_decodes,
                    "Mixed section: decode rows of each step", 0, 4096);
      ranged_option(sub, "--mixed-reps", o->mixed_reps,
                    "Mixed section: timed steps per size (the median is shown)", 1, 100000);
      sub.add_flag("--mixed-vary", o->mixed_vary,
                   "Mixed section: spread the decode contexts and the KV blocks, and "
                   "change the chunk size every step, as in a running engine");
      sub.add_flag("--argmax", o->argmax,
                   "Take the argmax on the GPU each step (as the engine's greedy "
                   "steps do) instead of stopping at the logits");
      sub.add_option("--mixed-prefill", o->mixed_prefill,
                     "Mixed section: prefill chunk sizes added to the decodes")
          ->delimiter(',')
          ->check(CLI::Range(0, 1 << 17));
      ranged_option(sub, "--gpu-memory-utilization", o->gpu_mem, "Share of GPU memory to use", 0.01,
                    1.0);
      sub.add_option("--kv-cache-dtype", o->kv_dtype,
                     "KV cache format: bf16, or fp8 (e4m3 with a scale per vector: about 1.9x "
                     "the tokens, half the bytes read a decode step)")
          ->capture_default_str()
          ->check(CLI::IsMember({"bf16", "fp8"}));
      sub.add_option("--quantization", o->quantization,
                     "Product weights: auto (the checkpoint's own), bf16, or fp8 (e4m3 in "
                     "128x128 blocks, quantized at load from bf16; Hopper)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "bf16", "none", "fp8"}));
      ranged_option(sub, "--gemv-max-tokens", o->gemv_max_tokens,
                    "Rows up to which decode GEMMs use the custom GEMV (0: cuBLASLt)", 0, 8);
      ranged_option(sub, "--max-num-tokens", o->max_num_tokens, "Rows per device pass", 16,
                    1 << 17);
      sub.add_flag("--no-graphs", o->no_graphs, "Do not replay decode CUDA graphs");
      sub.add_flag("--host-logits", o->host_logits,
                   "Copy fp32 logits to the host each step (as the engine does)");
      sub.add_option("--concurrency", o->concurrency,
                     "Engine mode: closed-loop client counts, e.g. 1,8,32,64,256")
          ->delimiter(',')
          ->check(CLI::Range(1, 4096));
      ranged_option(sub, "--prompt-len", o->prompt_len, "Engine mode: prompt tokens", 1, 1 << 20);
      ranged_option(sub, "--output-len", o->output_len, "Engine mode: output tokens", 1, 1 << 20);
      ranged_option(sub, "--requests-per-client", o->requests_per_client,
                    "Engine mode: requests each client sends in turn", 1, 1000);
      ranged_option(sub, "--shared-prefix", o->shared_prefix,
                    "Engine mode: a shared system prompt of this many tokens, then "
                    "short questions (0: random prompts)",
                    0, 1 << 20);
      ranged_option(sub, "--question-len", o->question_len,
                    "Engine mode: question tokens after the shared prefix", 1, 1 << 20);
      ranged_option(sub, "--max-num-batched-tokens", o->max_num_batched_tokens,
                    "Engine mode: token budget of one step", 16, 1 << 17);
      ranged_option(sub, "--decode-step-tokens", o->decode_step_tokens,
                    "Engine mode: steps with decodes take prefill up to this many "
                    "tokens in all while prompts meet --ttft-target-ms (0: off; -1: the "
                    "backend's choice, 256 on CUDA, off on the CPU)",
                    -1, 1 << 17);
      ranged_option(sub, "--ttft-target-ms", o->ttft_target_ms,
                    "Engine mode: first-token target that caps how long prompts ride "
                    "along",
                    0.0, 1e7);
      ranged_option(sub, "--ramp-ms", o->ramp_ms,
                    "Engine mode: clients start spread over this window (0: together)", 0.0, 1e7);
      ranged_option(sub, "--max-num-seqs", o->max_num_seqs,
                    "Engine mode: sequences in one step at most", 1, 4096);
      ranged_option(sub, "--temperature", o->temperature,
                    "Engine mode: sampling temperature of every request (0: greedy)", 0.0f, 100.0f);
      ranged_option(sub, "--top-p", o->top_p, "Engine mode: top-p of every request", 0.0f, 1.0f);
      ranged_option(sub, "--top-k", o->top_k, "Engine mode: top-k of every request (0: off)", 0,
                    1 << 20);
      sub.add_flag("--host-sampling", o->host_sampling,
                   "Engine mode: sample on the host even where the runner can sample");
      sub.add_option("--backend", o->backend, "Engine mode: cuda or cpu")
          ->capture_default_str()
          ->check(CLI::IsMember({"cuda", "cpu"}));
      return [o] {
        if (!o->concurrency.empty()) return run_engine_mode(*o);
        Bench b(*o);
        b.run();
        b.print();
        return 0;
      };
    });
