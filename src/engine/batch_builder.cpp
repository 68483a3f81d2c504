#include "engine/batch_builder.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::engine {

void build_forward_batch(std::span<Sequence* const> seqs, int block_size, model::ForwardBatch& b,
                         std::vector<int>& logit_row_of) {
  const size_t S = seqs.size();
  int T = 0, max_blocks = 0;
  for (const Sequence* s : seqs) {
    T += s->scheduled_tokens;
    max_blocks = std::max(max_blocks, int(s->blocks.size()));
  }
  b.tokens.resize(size_t(T));
  b.positions.resize(size_t(T));
  b.slot_mapping.resize(size_t(T));
  b.query_start.resize(S + 1);
  b.context_lens.resize(S);
  b.max_blocks = max_blocks;
  b.block_tables.assign(S * size_t(max_blocks), -1);
  b.logit_rows.clear();
  logit_row_of.assign(S, -1);

  int row = 0;
  for (size_t i = 0; i < S; ++i) {
    const Sequence& s = *seqs[i];
    const int start = s.num_computed, n = s.scheduled_tokens, end = start + n;
    TANDEM_CHECK(n > 0 && end <= s.num_tokens());
    TANDEM_CHECK(int(s.blocks.size()) * block_size >= end);
    b.query_start[i] = row;
    b.context_lens[i] = end;
    std::copy(s.blocks.begin(), s.blocks.end(), b.block_tables.begin() + ptrdiff_t(i) * max_blocks);
    for (int p = start; p < end; ++p, ++row) {
      b.tokens[size_t(row)] = s.tokens[size_t(p)];
      b.positions[size_t(row)] = p;
      b.slot_mapping[size_t(row)] =
          int64_t(s.blocks[size_t(p / block_size)]) * block_size + p % block_size;
    }
    if (end == s.num_tokens()) {
      logit_row_of[i] = int(b.logit_rows.size());
      b.logit_rows.push_back(row - 1);
    }
  }
  b.query_start[S] = row;
}

}  // namespace tandem::engine
