#pragma once
// The pure decisions of scheduling, kept apart from the queues so each is tested alone:
// how large a prefill chunk is (token budget, block alignment, free blocks), which class a
// request runs in, when a waiting bulk sequence is promoted, and who is preempted.
#include <span>

#include "engine/sequence.h"

namespace tandem::engine::policy {

// Tokens of one prefill chunk for a sequence with `num_computed` of `num_tokens` tokens in
// the cache: all that remain when they fit in `budget`, else the most that end on a block
// boundary (so every chunk but the last fills whole blocks); 0 when no boundary fits.
int prefill_chunk(int num_computed, int num_tokens, int budget, int block_size);

// The prefill rate (tokens per step) that finishes every pending prompt by its TTFT target
// when taken in order (earliest deadline first over a FIFO queue): for each prompt, the
// tokens of it and everything ahead of it, spread over the steps left before its target at
// the current step time. A prompt already past its target needs all of that in one step.
class PrefillRate {
 public:
  PrefillRate(double ttft_target_ms, double step_ms);
  void add(int tokens, double age_ms);  // in scheduling order
  int need() const { return need_; }

 private:
  double target_ms_, step_ms_;
  long long ahead_ = 0;
  int need_ = 0;
};

// Prefill tokens one step may carry. A step of up to `knee` tokens costs about what its
// decodes alone cost (reading the weights dominates), so prefill chunks ride along almost for
// free; beyond it every token adds compute. With decodes in the step and `need` (the
// PrefillRate) within the spare room under the knee, prefill is held to that room; otherwise
// (no decodes, knee off, or the targets need more) it gets the whole `budget`.
int prefill_allowance(int budget, int step_tokens, int num_decodes, int knee, int need);

// Bulk when asked for, or for kAuto when the prompt is longer than `bulk_threshold`.
SeqClass classify(Priority p, int prompt_len, int bulk_threshold);

// A bulk sequence that has waited `aging_steps` steps since submit ranks as interactive.
bool should_promote(const Sequence& s, uint64_t step, int aging_steps);

// The sequence to preempt so that `for_seq` can get blocks: the last (lowest rank, newest)
// of `running` (ordered by runs_before) that is not scheduled in this step. When
// `for_seq` is itself running it may be the answer (it then yields); a waiting `for_seq`
// only displaces sequences of a strictly lower class. nullptr: nobody may be preempted.
Sequence* pick_victim(std::span<Sequence* const> running, const Sequence& for_seq);

}  // namespace tandem::engine::policy
