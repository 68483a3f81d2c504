#pragma once
// The engine: one thread running the step loop (schedule -> forward -> sample -> publish)
// over a model::Runner. Front-tier threads call submit()/cancel(); events flow back through
// each request's RequestHandle. See docs/DESIGN.md ("Data flow of one chat request").
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "model/runner.h"

namespace tandem::engine {

struct EngineOptions {
  int max_num_seqs = 256;             // sequences in one step at most
  int max_num_batched_tokens = 4096;  // tokens (prefill + decode) in one step at most
  int bulk_prompt_threshold = 2048;   // kAuto requests with longer prompts run as bulk
  int max_model_len = 0;              // 0 = the runner's
  std::vector<TokenId> eos_ids;       // generation stops on any of these unless ignore_eos
  bool enable_prefix_caching = true;
  int bulk_aging_steps = 256;  // a waiting bulk request ranks as interactive after this
  double kv_watermark = 0.01;  // fraction of KV blocks kept free when admitting prompts
  int sample_threads = 0;      // threads sampling the rows of a step; 0 = min(8, cores)
  // Steps that decode carry prefill chunks only up to this many tokens in all, as long as
  // every waiting prompt still gets its first token within ttft_target_ms (docs/ENGINE.md,
  // "Holding prefill to a step size"). 0 = off: prefill fills max_num_batched_tokens;
  // < 0: the runner's step_knee() (CUDA: 256, CPU: off).
  int decode_step_tokens = -1;
  double ttft_target_ms = 300;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  double kv_usage = 0.0;  // fraction of KV blocks in use, 0..1
  uint64_t prompt_tokens = 0, generation_tokens = 0, preemptions = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // in tokens
  uint64_t steps = 0;
  // Steps that threw (each ended the requests it carried), all told and in a row up to the
  // last step run (0 once a step succeeds), and the last one's message.
  uint64_t failed_steps = 0;
  int failing_steps = 0;
  std::string last_error;
};

class Engine {
 public:
  // Starts the engine thread.
  Engine(std::unique_ptr<model::Runner> runner, EngineOptions opt);
  ~Engine();  // stops the thread; unfinished requests end with FinishReason::kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Throws tandem::Error(kInvalidArgument) for a request the engine can never
  // run (empty prompt, prompt + max_tokens over max_model_len, n < 1, token ids out of range).
  std::shared_ptr<RequestHandle> submit(Request r);
  // Thread-safe; unknown or finished ids are ignored. The request's KV blocks are freed in
  // the next step and its handle receives kFinish with kCancelled.
  void cancel(RequestId id);

  EngineStats stats() const;
  int max_model_len() const;
  int vocab_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::engine
