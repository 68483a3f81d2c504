#pragma once
// Offline engine benchmark: closed-loop clients over the step loop, no HTTP. `tandem bench`
// calls it with a real runner; tests call it with a mock.
//
// Throughput scenario, per concurrency C: C clients each send `requests_per_client`
// requests one after another (starting together, or spread over `ramp_ms`) (random prompt of
// prompt_len tokens, output_len tokens with EOS ignored, greedy unless `temperature` is set), each
// sending its next request as soon as the last one finished. Shared-prefix scenario
// (shared_prefix_len > 0): every prompt is one system prompt of shared_prefix_len tokens plus a
// fresh question of question_len tokens; one request runs alone first with an empty cache (the
// "cold" TTFT), then the clients run against the warm cache. Times are wall-clock around
// EngineCore::step on the calling thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "model/runner.h"

namespace tandem::engine {

struct EngineBenchOptions {
  std::vector<int> concurrency = {1, 8, 32, 64, 256};
  int prompt_len = 400;
  int output_len = 256;
  int requests_per_client = 2;
  // Client i sends its first request i/C of the way into this window (0: all at once, the
  // start-up burst); a closed loop started that way stays spread out, as real users are.
  double ramp_ms = 0;
  int shared_prefix_len = 0;  // > 0: the shared-prefix scenario instead
  int question_len = 32;
  uint64_t seed = 1;
  // Sampling of every request (default greedy). host_sampling: hide the runner's GPU
  // sampler (Runner::supports_sampling), so sampled steps bring the logits to the host.
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  bool host_sampling = false;
  EngineOptions engine;  // max_num_seqs is raised to C when smaller
};

struct EngineBenchRow {
  std::string scenario;  // "random" or "shared-prefix"
  int concurrency = 0;
  int requests = 0;
  uint64_t output_tokens = 0;
  double wall_s = 0, output_tok_s = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double ttft_steady_p99_ms = 0;  // requests after each client's first (no start-up burst)
  // The steady window: from the moment the last client has sent its first request to the
  // moment the first client has its last answer, every client always has a request in
  // flight, so its rate is the closed loop's sustained one, without the ramp's start and
  // the drain at the end. Zero when the window is empty (a client done before the last
  // one started). steady_seqs: mean sequences a step inside it.
  double steady_s = 0, steady_tok_s = 0, steady_seqs = 0;
  uint64_t steady_tokens = 0;
  double itl_p50_ms = 0, itl_p99_ms = 0;
  double cold_ttft_ms = 0;     // shared-prefix: the first request, empty cache
  double prefix_hit_rate = 0;  // prompt tokens served from the cache / prompt tokens
  uint64_t steps = 0, preemptions = 0;
  // Steps that carried prompt tokens (prefill chunks, alone or beside decodes) against the
  // decode-only ones: how many, their mean forward time, and their share of forward time.
  uint64_t prompt_steps = 0, decode_only_steps = 0;
  double prompt_step_forward_ms = 0, decode_only_forward_ms = 0, prompt_forward_share = 0;
  StepTiming mean_step;            // per-phase mean over steps, microseconds
  double engine_cpu_fraction = 0;  // (schedule+prepare+sample+publish) / step time
};

// Runs every concurrency level of `opt` on `runner` (a fresh EngineCore each). Throws
// Error(kInvalidArgument) when the lengths do not fit the runner.
std::vector<EngineBenchRow> run_engine_bench(model::Runner& runner, const EngineBenchOptions& opt);

// A fixed-width table, one row per level, then the per-step CPU breakdown.
std::string format_engine_bench(const std::vector<EngineBenchRow>& rows);

// A runner that does no model work (pseudo-random logits, or the argmax of them when
// `greedy`): run_engine_bench over it measures what the engine itself costs per step.
std::unique_ptr<model::Runner> make_null_runner(int vocab, int block_size, int num_blocks,
                                                bool greedy);

// Nearest-rank percentile (p in [0, 100]) of unsorted values; 0 for none.
double percentile(std::vector<double> v, double p);

}  // namespace tandem::engine
