// The Scheduler as the one writer of KV block state: what commit_step, add_fork and remove
// do to sequences' blocks, computed tokens and the prefix cache, checked on the scheduler
// alone (no engine core), with the block manager's invariants after every change.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace tandem::engine {
namespace {

constexpr int kBs = 4;

SchedulerConfig config(int max_seqs) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = 64;
  return c;
}

std::unique_ptr<Sequence> seq(uint64_t id, int prompt_len) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->arrival = id;
  for (int i = 0; i < prompt_len; ++i) s->tokens.push_back(TokenId(100 + i));
  s->num_prompt = prompt_len;
  return s;
}

TEST(SchedulerBlocks, CommitStepAdvancesComputedTokensAndCachesFullBlocks) {
  Scheduler sched(config(4), 16, kBs, true);
  auto a = seq(1, 10);
  sched.add_waiting(a.get());
  const ScheduleOutput& plan = sched.schedule(0);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(a->scheduled_tokens, 10);
  EXPECT_EQ(a->num_computed, 0);  // not computed until the step has run
  EXPECT_EQ(sched.blocks().num_cached(), 0);
  EXPECT_EQ(int(a->blocks.size()), 3);
  sched.commit_step();
  EXPECT_EQ(a->num_computed, 10);
  EXPECT_EQ(sched.blocks().num_cached(), 2);  // the two full blocks, not the partial third
  sched.end_step();
  EXPECT_EQ(a->scheduled_tokens, 0);
  sched.blocks().check_invariants();

  // The same prompt later finds both blocks.
  auto b = seq(2, 10);
  sched.add_waiting(b.get());
  sched.schedule(1);  // a decodes, b is admitted with its cached prefix
  EXPECT_EQ(b->cached_prompt_tokens, 8);
  EXPECT_EQ(b->scheduled_tokens, 2);
  EXPECT_EQ(sched.blocks().ref_count(b->blocks[0]), 2);
  sched.commit_step();
  sched.end_step();
  sched.remove(a.get());
  sched.remove(b.get());
  EXPECT_EQ(sched.blocks().num_used(), 0);
  EXPECT_EQ(sched.blocks().num_cached(), 2);  // freed, still findable
  sched.blocks().check_invariants();
}

TEST(SchedulerBlocks, ForkSharesTheFullPromptBlocksOrWaitsWithoutBlocks) {
  Scheduler sched(config(2), 16, kBs, true);
  auto parent = seq(1, 10);
  sched.add_waiting(parent.get());
  sched.schedule(0);
  sched.commit_step();
  sched.end_step();
  parent->tokens.push_back(7);  // its first output token

  auto c1 = seq(1, 10);
  c1->id = 2;
  sched.add_fork(*parent, c1.get());
  EXPECT_EQ(c1->status, SeqStatus::kRunning);
  EXPECT_EQ(c1->blocks, std::vector<BlockId>(parent->blocks.begin(), parent->blocks.begin() + 2));
  EXPECT_EQ(c1->num_computed, 8);  // the shared blocks' tokens; the partial block recomputes
  EXPECT_EQ(sched.blocks().ref_count(parent->blocks[0]), 2);
  EXPECT_EQ(sched.blocks().ref_count(parent->blocks[2]), 1);
  sched.blocks().check_invariants();

  // No seat left (max 2 running): the next sibling waits, holding nothing.
  auto c2 = seq(1, 10);
  c2->id = 3;
  sched.add_fork(*parent, c2.get());
  EXPECT_EQ(c2->status, SeqStatus::kWaiting);
  EXPECT_TRUE(c2->blocks.empty());
  EXPECT_EQ(c2->num_computed, 0);
  EXPECT_EQ(sched.blocks().ref_count(parent->blocks[0]), 2);
  EXPECT_EQ(sched.num_waiting(), 1);
  sched.blocks().check_invariants();

  // Once a seat frees, it is admitted on the cached prompt blocks.
  sched.remove(c1.get());
  sched.schedule(1);
  EXPECT_EQ(c2->status, SeqStatus::kRunning);
  EXPECT_EQ(c2->blocks[0], parent->blocks[0]);
  EXPECT_EQ(c2->num_computed, 8);
  sched.commit_step();
  sched.end_step();
  sched.remove(parent.get());
  sched.remove(c2.get());
  EXPECT_EQ(sched.blocks().num_used(), 0);
  sched.blocks().check_invariants();
}

}  // namespace
}  // namespace tandem::engine
