#pragma once
// A model::Runner for engine tests that keeps a real paged "KV cache" of (token, position)
// per slot. Each forward writes the new tokens to their slots, then reads every sequence's
// whole context back through its block table and checks it, so a wrong block table, slot
// mapping, prefix-cache hit or fork shows up as an exception (or as different tokens).
// The next token is a hash of the context read back, so the expected output of any prompt
// can be computed without the engine (reference_tokens) and compared exactly.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"
#include "model/runner.h"

namespace tandem::engine::testing {

using model::TokenId;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t context_hash(std::span<const TokenId> context) {
  uint64_t h = 0x1234;
  for (TokenId t : context) h = mix64(h ^ uint64_t(uint32_t(t)));
  return h;
}

// The mock model: next token after `context`.
inline TokenId mock_next(std::span<const TokenId> context, int vocab) {
  return TokenId(context_hash(context) % uint64_t(vocab));
}

// What a sequence generates alone, greedily, without stops.
inline std::vector<TokenId> reference_tokens(std::vector<TokenId> prompt, int n, int vocab) {
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) {
    TokenId t = mock_next(prompt, vocab);
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

class MockRunner : public model::Runner {
 public:
  MockRunner(int vocab, int block_size, int num_blocks, int max_model_len = 4096, int knee = 0)
      : vocab_(vocab), max_len_(max_model_len), knee_(knee) {
    layout_.num_layers = 1;
    layout_.num_kv_heads = 1;
    layout_.head_dim = 1;
    layout_.block_size = block_size;
    layout_.num_blocks = num_blocks;
    slot_token_.assign(size_t(num_blocks) * size_t(block_size), -1);
    slot_pos_.assign(size_t(num_blocks) * size_t(block_size), -1);
  }
  int vocab_size() const override { return vocab_; }
  int max_model_len() const override { return max_len_; }
  model::KvLayout kv_layout() const override { return layout_; }
  std::string name() const override { return "mock"; }
  int step_knee() const override { return knee_; }

  // One line per sequence of the last batches: "<first token>@<start>+<count>".
  std::vector<std::vector<std::string>> history;
  std::function<void()> before_forward;  // e.g. throw to test failure handling
  int forwards = 0;
  // context_hash of the whole context (as read back from the cache) of every logit row so
  // far: a sequence's prompt + output[:k] must be among them for each of its tokens.
  std::unordered_set<uint64_t> contexts_read;

  bool greedy = false;  // offer forward_greedy
  int greedy_forwards = 0;
  bool supports_greedy() const override { return greedy; }
  void forward_greedy(const model::ForwardBatch& b, std::span<TokenId> tokens) override {
    TANDEM_CHECK(greedy);
    ++greedy_forwards;
    TANDEM_CHECK(tokens.size() == b.logit_rows.size());
    auto next = run(b);
    std::copy(next.begin(), next.end(), tokens.begin());
  }
  void forward(const model::ForwardBatch& b, std::span<float> logits) override {
    TANDEM_CHECK(logits.size() == b.logit_rows.size() * size_t(vocab_));
    auto next = run(b);
    for (size_t k = 0; k < next.size(); ++k) fill_row(next[k], logits.data() + k * size_t(vocab_));
  }

  // forward_sample on the host: the same logits as forward(), each row sampled by
  // engine::sample_with_draw with the given uniform (so it must match the host path exactly),
  // the penalty window passed as prompt (its first part) and output (its last part).
  bool sampling = false;  // offer forward_sample
  int sample_forwards = 0;
  std::vector<model::RowSampling> last_rows;  // what the last forward_sample got
  bool supports_sampling() const override { return sampling; }
  void forward_sample(const model::ForwardBatch& b, std::span<const model::RowSampling> rows,
                      std::span<const TokenId> penalty_tokens, std::span<TokenId> tokens) override {
    TANDEM_CHECK(sampling);
    ++sample_forwards;
    TANDEM_CHECK(tokens.size() == b.logit_rows.size() && rows.size() == tokens.size());
    last_rows.assign(rows.begin(), rows.end());
    auto next = run(b);
    std::vector<float> row(static_cast<size_t>(vocab_));
    for (size_t k = 0; k < next.size(); ++k) {
      fill_row(next[k], row.data());
      const model::RowSampling& r = rows[k];
      SamplingParams p;
      static_cast<SamplingKnobs&>(p) = r;
      auto win = penalty_tokens.subspan(size_t(r.penalty_offset), size_t(r.penalty_count));
      auto prompt = win.first(size_t(r.penalty_count - r.penalty_output));
      auto output = win.last(size_t(r.penalty_output));
      tokens[k] = sample_with_draw(row, p, prompt, output, [&] { return r.uniform; }).token;
    }
  }

 private:
  void fill_row(TokenId next, float* row) const {
    for (int v = 0; v < vocab_; ++v) row[v] = float(v % 7) * 0.1f;  // ties elsewhere
    row[next] = 5.0f;
  }

  // Writes the batch into the mock cache, checks every context, returns the next token of
  // each logit row.
  std::vector<TokenId> run(const model::ForwardBatch& b) {
    ++forwards;
    if (before_forward) before_forward();
    const int S = b.num_seqs(), bs = layout_.block_size;
    TANDEM_CHECK(int(b.positions.size()) == b.num_tokens());
    TANDEM_CHECK(int(b.slot_mapping.size()) == b.num_tokens());
    TANDEM_CHECK(int(b.context_lens.size()) == S);
    TANDEM_CHECK(int(b.block_tables.size()) == S * b.max_blocks);
    for (int r = 0; r < b.num_tokens(); ++r) {
      const int64_t slot = b.slot_mapping[size_t(r)];
      TANDEM_CHECK(slot >= 0 && slot < int64_t(slot_token_.size()));
      TANDEM_CHECK(b.tokens[size_t(r)] >= 0 && b.tokens[size_t(r)] < vocab_);
      slot_token_[size_t(slot)] = b.tokens[size_t(r)];
      slot_pos_[size_t(slot)] = b.positions[size_t(r)];
    }
    std::vector<std::string> line;
    std::vector<TokenId> ctx;
    std::vector<std::vector<TokenId>> ctx_of_row(size_t(b.num_tokens()));
    for (int s = 0; s < S; ++s) {
      const int q0 = b.query_start[size_t(s)], q1 = b.query_start[size_t(s) + 1];
      TANDEM_CHECK(q1 > q0);
      const int len = b.context_lens[size_t(s)];
      TANDEM_CHECK(b.positions[size_t(q1 - 1)] == len - 1);
      ctx.clear();
      for (int p = 0; p < len; ++p) {
        const int blk = b.block_tables[size_t(s) * size_t(b.max_blocks) + size_t(p / bs)];
        TANDEM_CHECK(blk >= 0 && blk < layout_.num_blocks);
        const size_t slot = size_t(blk) * size_t(bs) + size_t(p % bs);
        if (slot_pos_[slot] != p)
          tandem::fail(tandem::ErrorKind::kInternal,
                       "mock KV: seq {} position {} reads slot {} holding position {}", s, p, slot,
                       slot_pos_[slot]);
        ctx.push_back(slot_token_[slot]);
      }
      for (int r = q0; r < q1; ++r) {
        TANDEM_CHECK(b.positions[size_t(r)] == len - (q1 - r));
        ctx_of_row[size_t(r)].assign(ctx.begin(), ctx.begin() + (b.positions[size_t(r)] + 1));
      }
      line.push_back(std::to_string(ctx[0]) + "@" + std::to_string(b.positions[size_t(q0)]) + "+" +
                     std::to_string(q1 - q0));
    }
    history.push_back(std::move(line));
    std::vector<TokenId> next;
    for (int r : b.logit_rows) {
      TANDEM_CHECK(r >= 0 && r < b.num_tokens());
      contexts_read.insert(context_hash(ctx_of_row[size_t(r)]));
      next.push_back(mock_next(ctx_of_row[size_t(r)], vocab_));
    }
    return next;
  }

  int vocab_, max_len_, knee_;
  model::KvLayout layout_;
  std::vector<TokenId> slot_token_;
  std::vector<int32_t> slot_pos_;
};

}  // namespace tandem::engine::testing
