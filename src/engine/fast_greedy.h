#pragma once
// The step loop's shortcut for the common serving case: greedy decoding without penalties
// or logprobs needs only the argmax of the row, not the sampler's log-softmax over the
// whole vocabulary (a 152k-entry row costs ~1 ms there, ~30 us here). Same answer as
// engine::sample: the first maximal index.
#include <cstdint>
#include <span>

#include "engine/request.h"

namespace tandem::engine {

// True when sample() would return the argmax and the caller needs nothing else.
bool fast_greedy_applies(const SamplingParams& p);

// Index of the first largest value; -1 when the row holds NaN or infinity (the caller
// then goes through sample(), which reports it).
TokenId fast_argmax(std::span<const float> row);

// The first largest value among the entries `allowed` sets (bit i of word i / 32); -1 when
// none is allowed or a NaN/infinity is among them.
TokenId masked_argmax(std::span<const float> row, const uint32_t* allowed);

}  // namespace tandem::engine
