#pragma once
// What the engine is configured with (EngineOptions), and the one derived setting that
// depends on the runner.
#include <vector>

#include "model/runner.h"

namespace tandem::engine {

using model::TokenId;

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
  // Threads computing token masks of constrained rows beside the forward pass; -1 =
  // min(8, cores / 2), 0 = on the engine thread after the forward pass.
  int mask_threads = -1;
  // Steps that decode carry prefill chunks only up to this many tokens in all, as long as
  // every waiting prompt still gets its first token within ttft_target_ms (docs/ENGINE.md,
  // "Holding prefill to a step size"). 0 = off: prefill fills max_num_batched_tokens;
  // < 0: the runner's step_knee() (CUDA: 256, CPU: off).
  int decode_step_tokens = -1;
  double ttft_target_ms = 300;
};

// The decode_step_tokens the scheduler uses: the option, or the runner's step_knee() when the
// option is < 0.
inline int effective_decode_step_tokens(const EngineOptions& o, const model::Runner& runner) {
  return o.decode_step_tokens < 0 ? runner.step_knee() : o.decode_step_tokens;
}

}  // namespace tandem::engine
