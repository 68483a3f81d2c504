#pragma once
// The scheduler: which sequences run in the next step, and how many tokens each.
//
// Each step: (1) bulk sequences that waited long enough are promoted; (2) when the first
// waiting interactive sequence cannot get a seat or blocks, running bulk sequences are
// preempted for it; (3) every running sequence that decodes gets one token, in priority
// order, preempting the lowest-priority newest sequences when blocks run out (possibly
// itself); (4) prefill chunks (new prompts, continued long prompts, recomputed preempted
// sequences) fill the rest of the token budget in priority order, in block multiples; with
// `decode_step_tokens` set, a step that has decodes takes prefill only up to that size
// while the waiting prompts can still meet their TTFT target that way (a step that small
// costs about what its decodes cost alone, so the prompts ride along almost for free).
// Preemption is by recompute: the victim drops its blocks (full ones stay in the prefix
// cache) and waits again at its original place in the queue.
//
// It never deadlocks: a sequence never needs more blocks than the cache has (the engine
// caps max_model_len), the highest-priority running sequence may preempt every other
// unscheduled one, and a decode always completes its step.
//
// The scheduler owns the BlockManager and is the only writer of KV block state: which
// blocks a sequence holds, how many of its tokens are computed, what the prefix cache
// holds. Everyone else reads it through blocks().
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace tandem::engine {

struct SchedulerConfig {
  int max_num_seqs = 256;             // sequences holding KV (running) at most
  int max_num_batched_tokens = 4096;  // tokens in one step at most (>= max_num_seqs)
  int bulk_aging_steps = 256;         // steps after which a waiting bulk sequence is promoted
  int watermark_blocks = 0;           // blocks kept free when admitting new sequences
  // Steps with decodes carry prefill only up to this many tokens in all while every pending
  // prompt still gets its first token within ttft_target_ms (policy::prefill_allowance);
  // 0 = off (prefill always fills the budget).
  int decode_step_tokens = 0;
  double ttft_target_ms = 300;
};

struct ScheduleOutput {
  std::vector<Sequence*> seqs;       // batch order: decodes, then prefill chunks; each has
                                     // scheduled_tokens > 0
  std::vector<Sequence*> preempted;  // preempted in this step (now waiting)
  int num_tokens = 0;
  int num_decodes = 0;
  void clear() {
    seqs.clear();
    preempted.clear();
    num_tokens = num_decodes = 0;
  }
};

struct SchedulerCounters {
  uint64_t preemptions = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;  // prompt tokens at first admission
};

class Scheduler {
 public:
  // A cache of `num_blocks` blocks of `block_size` tokens.
  Scheduler(SchedulerConfig cfg, int num_blocks, int block_size, bool enable_prefix_caching);

  // A new sequence without blocks joins the waiting queue of its class.
  void add_waiting(Sequence* s);
  // A forked sample of `parent`, whose prompt is computed: it shares the parent's full
  // prompt blocks (their tokens count as computed) and joins the running set. Without a
  // free seat it waits instead, holding no blocks (the shared ones stay in the prefix
  // cache, so its prefill finds them).
  void add_fork(const Sequence& parent, Sequence* child);
  // Takes a sequence out of the queues and releases its blocks (finish or cancel).
  void remove(Sequence* s);

  // Plans the next step. `now_ms` is the clock of Sequence::submit_ms; `step_ms` the recent
  // step time (both only matter with decode_step_tokens).
  const ScheduleOutput& schedule(uint64_t step, double now_ms = 0, double step_ms = 0);
  // The planned step ran: every scheduled sequence's new tokens now have K/V in the cache
  // (num_computed advances by scheduled_tokens), and its blocks that became full and
  // computed join the prefix cache. Call once, after the forward pass.
  void commit_step();
  // Forgets the planned step (scheduled_tokens back to 0). Call once its results are
  // applied and before any of its sequences is destroyed.
  void end_step();

  const BlockManager& blocks() const { return bm_; }

  std::span<Sequence* const> running() const { return running_; }
  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_[0].size() + waiting_[1].size()); }
  bool idle() const { return running_.empty() && num_waiting() == 0; }
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  void promote(uint64_t step);
  void preempt_for_interactive();
  void schedule_decodes(int& budget);
  void schedule_prefills(int& budget);
  int prefill_allowance(int budget) const;
  bool admit(Sequence* s, int& budget);             // false: stop admitting in this step
  bool continue_prefill(Sequence* s, int& budget);  // false: the budget is spent
  void preempt(Sequence* v);
  void insert_running(Sequence* s);
  void insert_waiting(Sequence* s);
  void erase_running(Sequence* s);
  void take(Sequence* s, int tokens);

  SchedulerConfig cfg_;
  BlockManager bm_;
  std::vector<Sequence*> running_;    // ordered by runs_before
  std::deque<Sequence*> waiting_[2];  // per rank, ordered by runs_before
  ScheduleOutput out_;
  SchedulerCounters counters_;
  double now_ms_ = 0, step_ms_ = 0;
  std::vector<Sequence*> prefill_running_;  // scratch
  std::vector<BlockId> prefix_;             // scratch
};

}  // namespace tandem::engine
