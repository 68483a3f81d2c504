#pragma once
// Turns a scheduled step into the runner's ForwardBatch (see model/runner.h for shapes).
// The batch's vectors are reused from step to step, so a steady state allocates nothing.
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "model/runner.h"

namespace tandem::engine {

// Fills `batch` with the scheduled tokens of `seqs` (each with scheduled_tokens > 0 and
// blocks covering num_computed + scheduled_tokens positions). `logit_row_of[i]` receives
// the index into batch.logit_rows of sequence i's last row when this step completes its
// tokens (so a next token is sampled), else -1.
void build_forward_batch(std::span<Sequence* const> seqs, int block_size,
                         model::ForwardBatch& batch, std::vector<int>& logit_row_of);

}  // namespace tandem::engine
