// The pure scheduling decisions, one table each.
#include <gtest/gtest.h>

#include "engine/schedule_policy.h"

namespace tandem::engine {
namespace {

TEST(PrefillChunk, TableOfBudgetsAndAlignment) {
  struct Row {
    int computed, tokens, budget, bs, want;
  };
  const Row rows[] = {
      {0, 100, 4096, 16, 100},  // all fits: the whole remainder, unaligned end is fine
      {0, 100, 64, 16, 64},     // budget on a boundary
      {0, 100, 70, 16, 64},     // budget rounded down to a boundary
      {0, 100, 15, 16, 0},      // no boundary fits
      {64, 100, 36, 16, 36},    // exact remainder
      {64, 100, 20, 16, 16},    // next boundary is 80
      {32, 1000, 33, 32, 32},   // block 32
      {32, 1000, 31, 32, 0},   {99, 100, 1, 16, 1},  // a decode-sized remainder
      {100, 100, 50, 16, 0},                         // nothing left
      {0, 100, 0, 16, 0},                            // no budget
      {48, 53, 3, 16, 0},  // unfinished tail larger than budget, no boundary before 53
  };
  for (const Row& r : rows)
    EXPECT_EQ(policy::prefill_chunk(r.computed, r.tokens, r.budget, r.bs), r.want)
        << r.computed << " " << r.tokens << " " << r.budget << " " << r.bs;
}

TEST(Classify, AutoUsesThreshold) {
  EXPECT_EQ(policy::classify(Priority::kAuto, 2048, 2048), SeqClass::kInteractive);
  EXPECT_EQ(policy::classify(Priority::kAuto, 2049, 2048), SeqClass::kBulk);
  EXPECT_EQ(policy::classify(Priority::kBulk, 3, 2048), SeqClass::kBulk);
  EXPECT_EQ(policy::classify(Priority::kInteractive, 9999, 2048), SeqClass::kInteractive);
}

TEST(Promote, OnlyAgedUnpromotedBulk) {
  Sequence s;
  s.cls = SeqClass::kBulk;
  s.submit_step = 10;
  EXPECT_FALSE(policy::should_promote(s, 14, 5));
  EXPECT_TRUE(policy::should_promote(s, 15, 5));
  s.promoted = true;
  EXPECT_FALSE(policy::should_promote(s, 15, 5));
  Sequence i;
  i.cls = SeqClass::kInteractive;
  EXPECT_FALSE(policy::should_promote(i, 1000, 5));
}

TEST(PickVictim, LowestRankNewestUnscheduled) {
  Sequence a, b, c, d;
  a.id = 1, a.arrival = 1, a.status = SeqStatus::kRunning;
  b.id = 2, b.arrival = 2, b.status = SeqStatus::kRunning;
  c.id = 3, c.arrival = 0, c.cls = SeqClass::kBulk, c.status = SeqStatus::kRunning;
  d.id = 4, d.arrival = 5, d.cls = SeqClass::kBulk, d.status = SeqStatus::kRunning;
  std::vector<Sequence*> running = {&a, &b, &c, &d};  // runs_before order
  for (size_t i = 1; i < running.size(); ++i)
    ASSERT_TRUE(runs_before(*running[i - 1], *running[i]));

  EXPECT_EQ(policy::pick_victim(running, a), &d);  // newest bulk goes first
  d.scheduled_tokens = 1;                          // already in this step: untouchable
  EXPECT_EQ(policy::pick_victim(running, a), &c);
  c.scheduled_tokens = 1;
  EXPECT_EQ(policy::pick_victim(running, a), &b);
  EXPECT_EQ(policy::pick_victim(running, b), &b);  // b is the lowest unscheduled: it yields

  // A waiting interactive sequence only displaces a lower class.
  Sequence w;
  w.id = 9, w.arrival = 9, w.status = SeqStatus::kWaiting;
  c.scheduled_tokens = d.scheduled_tokens = 0;
  EXPECT_EQ(policy::pick_victim(running, w), &d);
  c.scheduled_tokens = d.scheduled_tokens = 1;
  EXPECT_EQ(policy::pick_victim(running, w), nullptr);  // b is interactive too
}

TEST(RunsBefore, PromotedBulkRanksWithInteractiveByAge) {
  Sequence old_bulk, young;
  old_bulk.cls = SeqClass::kBulk, old_bulk.arrival = 1, old_bulk.id = 1;
  young.arrival = 2, young.id = 2;
  EXPECT_TRUE(runs_before(young, old_bulk));
  old_bulk.promoted = true;
  EXPECT_TRUE(runs_before(old_bulk, young));
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine::policy {
namespace {

TEST(PrefillRate, SpreadsEachPromptAndWhatIsAheadOverItsStepsLeft) {
  // 300 ms target, 10 ms steps.
  PrefillRate r(300.0, 10.0);
  EXPECT_EQ(r.need(), 0);
  r.add(400, 0.0);  // 30 steps left: ceil(400 / 30)
  EXPECT_EQ(r.need(), 14);
  r.add(400, 100.0);  // 800 tokens ahead of its target in 20 steps
  EXPECT_EQ(r.need(), 40);
  r.add(16, 295.0);  // under one step left: everything up to it now
  EXPECT_EQ(r.need(), 816);
  r.add(10, 0.0);  // a newer prompt never lowers the rate
  EXPECT_EQ(r.need(), 816);
  PrefillRate late(300.0, 10.0);
  late.add(50, 1000.0);  // past its target
  EXPECT_EQ(late.need(), 50);
  PrefillRate unknown_step(300.0, 0.0);  // no step measured yet: 1 ms steps
  unknown_step.add(600, 0.0);
  EXPECT_EQ(unknown_step.need(), 2);
}

TEST(PrefillAllowance, HoldsPrefillUnderTheKneeOnlyWhenTargetsAllow) {
  struct Case {
    int budget, step_tokens, decodes, knee, need, want;
  } cases[] = {
      {4000, 64, 64, 192, 100, 128},   // decodes + 128 prefill = the knee
      {4000, 64, 64, 192, 128, 128},   // exactly what the targets need
      {4000, 64, 64, 192, 129, 4000},  // targets need more: the whole budget
      {4000, 0, 0, 192, 0, 4000},      // no decodes: nothing to ride along with
      {4000, 64, 64, 0, 0, 4000},      // knee off
      {4000, 200, 200, 192, 0, 4000},  // decodes alone past the knee
      {100, 64, 64, 192, 10, 100},     // the budget is smaller than the room
  };
  for (const auto& c : cases)
    EXPECT_EQ(prefill_allowance(c.budget, c.step_tokens, c.decodes, c.knee, c.need), c.want)
        << c.budget << " " << c.step_tokens << " " << c.decodes << " " << c.knee << " " << c.need;
}

}  // namespace
}  // namespace tandem::engine::policy
