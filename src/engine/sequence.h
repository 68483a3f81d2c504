#pragma once
// One sample of one request as the engine tracks it: its tokens, how many of them have
// K/V in the paged cache, and the blocks holding them. A request with n samples becomes n
// sequences (the first prefills the prompt, the others fork from it). See docs/ENGINE.md.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/rng.h"
#include "engine/request.h"
#include "model/runner.h"
#include "structured/matcher.h"

namespace tandem::engine {

using model::BlockId;
using SeqId = uint64_t;

// Structured output: the constraint's state (null matcher: unconstrained), and whether it
// has started (it waits for TokenConstraint::start_after when the model thinks first). A
// copy of a sequence gets its own copy of the state.
struct ConstraintState {
  std::unique_ptr<structured::Matcher> matcher;
  bool started = false;
  ConstraintState() = default;
  ConstraintState(const ConstraintState& o) { *this = o; }
  ConstraintState& operator=(const ConstraintState& o) {
    matcher = o.matcher ? std::make_unique<structured::Matcher>(*o.matcher) : nullptr;
    started = o.started;
    return *this;
  }
  ConstraintState(ConstraintState&&) = default;
  ConstraintState& operator=(ConstraintState&&) = default;
};

// Scheduling class. Lower runs first; a bulk sequence that has waited long enough is
// promoted and then ranks as interactive for the rest of its life.
enum class SeqClass : int { kInteractive = 0, kBulk = 1 };

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  SeqId id = 0;
  RequestId request = 0;
  int sample = 0;        // which of the request's n samples
  uint64_t arrival = 0;  // submit order of the request: older runs first, newer is preempted first
  uint64_t submit_step = 0;  // engine step at submit, for aging
  double submit_ms = 0;      // engine clock at submit, for the TTFT target
  double admitted_ms = -1;   // engine clock when first scheduled (-1: not yet)
  SeqClass cls = SeqClass::kInteractive;
  bool promoted = false;  // aged bulk, now ranked as interactive
  SeqStatus status = SeqStatus::kWaiting;

  std::vector<TokenId> tokens;  // prompt then output
  int num_prompt = 0;
  int num_computed = 0;         // tokens whose K/V are in the cache (a prefix of `tokens`)
  std::vector<BlockId> blocks;  // block i holds positions [i*bs, (i+1)*bs)

  // Prefix-cache chain state (owned by BlockManager): how many leading blocks carry a
  // registered hash, and the hash of the last of them.
  int num_hashed_blocks = 0;
  uint64_t last_hash = 0;

  int cached_prompt_tokens = -1;  // prompt tokens served by the prefix cache at first admission
  bool forked = false;            // the n-1 sibling samples have been created
  bool greedy_only = false;       // argmax is all its sampling needs (fast_greedy_applies)
  int scheduled_tokens = 0;       // new tokens in the current step (0 = not scheduled)

  Rng rng{0};
  ConstraintState constraint;
  bool constrained() const { return constraint.matcher && constraint.started; }

  int num_tokens() const { return int(tokens.size()); }
  int num_output() const { return num_tokens() - num_prompt; }
  int remaining() const { return num_tokens() - num_computed; }  // tokens still to compute
  bool is_decode() const { return remaining() == 1; }
  // Effective rank for ordering: (class, arrival, id); smaller runs first.
  int rank() const { return promoted ? 0 : int(cls); }
  std::span<const TokenId> prompt() const { return {tokens.data(), size_t(num_prompt)}; }
  std::span<const TokenId> output() const {
    return {tokens.data() + num_prompt, size_t(num_output())};
  }
};

// Strict order of scheduling priority: true when `a` runs before `b`.
inline bool runs_before(const Sequence& a, const Sequence& b) {
  if (a.rank() != b.rank()) return a.rank() < b.rank();
  if (a.arrival != b.arrival) return a.arrival < b.arrival;
  return a.id < b.id;
}

}  // namespace tandem::engine
