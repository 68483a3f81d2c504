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
