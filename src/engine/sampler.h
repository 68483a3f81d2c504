#pragma once
// Token sampling for one sequence: penalties, temperature, top-k, top-p, min-p, a seeded
// draw, and log-probabilities.
//
// Order (the same as Hugging Face's logits processors and vLLM's sampler):
//   1. penalties on the logits: repetition (HF, multiplicative) over prompt + output,
//      presence/frequency (OpenAI, additive) over the output only; both look back over the
//      last `penalty_last_n` tokens when it is >= 0;
//   2. temperature 0 (or top_k 1): argmax, ties to the lowest id;
//   3. otherwise logits / temperature, then top-k, then top-p over what top-k kept, then
//      min-p (relative to the most likely token), and one uniform draw from `rng`.
// Log-probabilities (the sampled token's and the top n) are those of the model's raw
// distribution, log_softmax of the logits before step 1 (what vLLM reports by default), so
// they do not change with the sampling settings.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/rng.h"
#include "engine/request.h"

namespace tandem::engine {

struct SampleResult {
  TokenId token = -1;
  float logprob = 0.0f;         // raw log-probability of `token`
  std::vector<TopLogprob> top;  // the top `top_logprobs` raw entries, most likely first
};

// Throws Error(kInvalidArgument) for parameters out of range (temperature < 0, top_p not in
// (0, 1], top_k < 0, min_p not in [0, 1], repetition_penalty <= 0, non-finite values).
void validate(const SamplingParams& p);

// logits: one row [vocab], modified in place. prompt/output: the sequence's tokens so far.
// rng: the sequence's generator (seeded from SamplingParams::seed by the caller); it is
// advanced by exactly one draw when sampling is random and not at all when greedy.
// allowed: a token mask (bit t of word t / 32; null: every token), applied after the raw
// log-probabilities are taken and before step 1, so every setting samples among the
// allowed tokens only.
SampleResult sample(std::span<float> logits, const SamplingParams& p,
                    std::span<const TokenId> prompt, std::span<const TokenId> output, Rng& rng,
                    const uint32_t* allowed = nullptr);

// sample() with the draw from `uniform` (called once, and only when sampling is random,
// right before the draw): lets a caller supply the value the sequence's RNG produced, for
// example to check another sampler (the GPU one) on the same draws.
SampleResult sample_with_draw(std::span<float> logits, const SamplingParams& p,
                              std::span<const TokenId> prompt, std::span<const TokenId> output,
                              const std::function<double()>& uniform,
                              const uint32_t* allowed = nullptr);

// Sets every entry of `logits` that `allowed` does not allow to -inf.
void apply_mask(std::span<float> logits, const uint32_t* allowed);

// The generator a sequence uses: seeded from `seed` when given, else from `fallback` (for
// example a request counter), so an unseeded request still gets its own stream.
Rng make_sequence_rng(const SamplingParams& p, uint64_t fallback);

}  // namespace tandem::engine
