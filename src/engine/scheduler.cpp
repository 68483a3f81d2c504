#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "engine/schedule_policy.h"

namespace tandem::engine {

namespace {
bool before(const Sequence* a, const Sequence* b) {
  return runs_before(*a, *b);
}
}  // namespace

Scheduler::Scheduler(SchedulerConfig cfg, int num_blocks, int block_size,
                     bool enable_prefix_caching)
    : cfg_(cfg), bm_(num_blocks, block_size, enable_prefix_caching) {
  if (cfg_.max_num_seqs < 1) fail(ErrorKind::kInvalidArgument, "max_num_seqs must be >= 1");
  if (cfg_.max_num_batched_tokens < cfg_.max_num_seqs)
    fail(ErrorKind::kInvalidArgument,
         "max_num_batched_tokens ({}) must be >= max_num_seqs ({}) so every decode fits a step",
         cfg_.max_num_batched_tokens, cfg_.max_num_seqs);
  if (cfg_.bulk_aging_steps < 0) fail(ErrorKind::kInvalidArgument, "bulk_aging_steps < 0");
  if (cfg_.decode_step_tokens < 0 || !(cfg_.ttft_target_ms >= 0))
    fail(ErrorKind::kInvalidArgument, "decode_step_tokens and ttft_target_ms must be >= 0");
}

void Scheduler::insert_running(Sequence* s) {
  s->status = SeqStatus::kRunning;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), s, before), s);
}

void Scheduler::insert_waiting(Sequence* s) {
  s->status = SeqStatus::kWaiting;
  auto& q = waiting_[s->rank()];
  q.insert(std::upper_bound(q.begin(), q.end(), s, before), s);
}

void Scheduler::erase_running(Sequence* s) {
  auto it = std::find(running_.begin(), running_.end(), s);
  TANDEM_CHECK(it != running_.end());
  running_.erase(it);
}

void Scheduler::add_waiting(Sequence* s) {
  TANDEM_CHECK(s->blocks.empty());
  s->num_computed = 0;
  insert_waiting(s);
}

void Scheduler::add_fork(const Sequence& parent, Sequence* child) {
  const int shared = parent.num_prompt / bm_.block_size();  // full prompt blocks, all computed
  bm_.fork(parent, *child, shared);
  child->num_computed = shared * bm_.block_size();
  if (int(running_.size()) < cfg_.max_num_seqs) {
    insert_running(child);
    return;
  }
  bm_.release(*child);  // no seat: wait; its prompt blocks stay in the cache
  add_waiting(child);
}

void Scheduler::remove(Sequence* s) {
  if (s->status == SeqStatus::kRunning) {
    erase_running(s);
  } else if (s->status == SeqStatus::kWaiting) {
    auto& q = waiting_[s->rank()];
    auto it = std::find(q.begin(), q.end(), s);
    TANDEM_CHECK(it != q.end());
    q.erase(it);
  }
  bm_.release(*s);
  s->status = SeqStatus::kFinished;
  s->scheduled_tokens = 0;
}

void Scheduler::preempt(Sequence* v) {
  erase_running(v);
  bm_.release(*v);
  v->scheduled_tokens = 0;
  insert_waiting(v);
  out_.preempted.push_back(v);
  ++counters_.preemptions;
}

void Scheduler::take(Sequence* s, int tokens) {
  s->scheduled_tokens = tokens;
  out_.seqs.push_back(s);
  out_.num_tokens += tokens;
}

void Scheduler::promote(uint64_t step) {
  auto& bulk = waiting_[1];
  for (auto it = bulk.begin(); it != bulk.end();) {
    if (policy::should_promote(**it, step, cfg_.bulk_aging_steps)) {
      Sequence* s = *it;
      it = bulk.erase(it);
      s->promoted = true;
      insert_waiting(s);
    } else {
      ++it;
    }
  }
  bool changed = false;
  for (Sequence* s : running_) {
    if (policy::should_promote(*s, step, cfg_.bulk_aging_steps)) {
      s->promoted = true;
      changed = true;
    }
  }
  if (changed) std::stable_sort(running_.begin(), running_.end(), before);
}

void Scheduler::preempt_for_interactive() {
  if (waiting_[0].empty()) return;
  Sequence* head = waiting_[0].front();
  auto lowest_bulk = [&]() -> Sequence* {
    Sequence* v = running_.empty() ? nullptr : running_.back();
    return v && v->rank() > head->rank() ? v : nullptr;
  };
  // A seat.
  while (int(running_.size()) >= cfg_.max_num_seqs) {
    Sequence* v = lowest_bulk();
    if (!v) return;
    preempt(v);
  }
  // Blocks for its first chunk.
  bm_.lookup_prefix(*head, prefix_);
  const int nc = int(prefix_.size()) * bm_.block_size();
  const int chunk =
      policy::prefill_chunk(nc, head->num_tokens(), cfg_.max_num_batched_tokens, bm_.block_size());
  auto need = [&] {
    return bm_.blocks_for(nc + chunk) - int(prefix_.size()) + bm_.count_free(prefix_) +
           cfg_.watermark_blocks;
  };
  while (bm_.num_free() < need()) {
    Sequence* v = lowest_bulk();
    if (!v) return;
    preempt(v);
  }
}

void Scheduler::schedule_decodes(int& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    if (!s->is_decode()) {
      ++i;
      continue;
    }
    bool yielded = false;
    while (bm_.blocks_needed(*s, s->num_computed + 1) > bm_.num_free()) {
      Sequence* v = policy::pick_victim(running_, *s);
      TANDEM_CHECK(v != nullptr);
      preempt(v);
      if (v == s) {
        yielded = true;
        break;
      }
    }
    if (yielded) continue;  // running_[i] is now the next sequence (or past the end)
    bm_.grow(*s, s->num_computed + 1);
    take(s, 1);
    ++out_.num_decodes;
    --budget;
    ++i;
  }
}

bool Scheduler::continue_prefill(Sequence* s, int& budget) {
  const int bs = bm_.block_size();
  for (;;) {
    const int room = (int(s->blocks.size()) + bm_.num_free()) * bs - s->num_computed;
    const int chunk =
        policy::prefill_chunk(s->num_computed, s->num_tokens(), std::min(budget, room), bs);
    if (chunk > 0) {
      bm_.grow(*s, s->num_computed + chunk);
      take(s, chunk);
      budget -= chunk;
      return true;
    }
    if (policy::prefill_chunk(s->num_computed, s->num_tokens(), budget, bs) == 0)
      return false;  // the token budget, not memory, is what is missing
    Sequence* v = policy::pick_victim(running_, *s);
    TANDEM_CHECK(v != nullptr);
    preempt(v);
    if (v == s) return true;  // it yielded; later candidates may still fit
  }
}

bool Scheduler::admit(Sequence* s, int& budget) {
  if (int(running_.size()) >= cfg_.max_num_seqs) return false;
  const int bs = bm_.block_size();
  bm_.lookup_prefix(*s, prefix_);
  const int matched = int(prefix_.size());
  const int nc = matched * bs;
  const int claimed_free = bm_.count_free(prefix_);
  // New blocks we may take, keeping the watermark for running sequences.
  const int spare = bm_.num_free() - claimed_free - cfg_.watermark_blocks;
  if (spare < 0) return false;
  const int room = (matched + spare) * bs - nc;
  const int chunk = policy::prefill_chunk(nc, s->num_tokens(), std::min(budget, room), bs);
  if (chunk == 0) return false;  // strict order within a class: no overtaking
  const bool first = s->cached_prompt_tokens < 0;
  if (first) {
    s->cached_prompt_tokens = std::min(nc, s->num_prompt);
    s->admitted_ms = now_ms_;
    counters_.prefix_queries += uint64_t(s->num_prompt);
    counters_.prefix_hits += uint64_t(s->cached_prompt_tokens);
  }
  auto& q = waiting_[s->rank()];
  TANDEM_CHECK(!q.empty() && q.front() == s);
  q.pop_front();
  bm_.claim_prefix(*s, prefix_);
  bm_.grow(*s, nc + chunk);
  insert_running(s);
  take(s, chunk);
  budget -= chunk;
  return true;
}

int Scheduler::prefill_allowance(int budget) const {
  auto allowance = [&](int need) {
    return policy::prefill_allowance(budget, out_.num_tokens, out_.num_decodes,
                                     cfg_.decode_step_tokens, need);
  };
  const int room = allowance(0);      // the most it could hold prefill to
  if (room >= budget) return budget;  // nothing to hold back: skip the queue walk
  policy::PrefillRate rate(cfg_.ttft_target_ms, step_ms_);
  for (const Sequence* s : prefill_running_) rate.add(s->remaining(), now_ms_ - s->submit_ms);
  for (const auto& q : waiting_)
    for (const Sequence* s : q) {
      rate.add(s->remaining(), now_ms_ - s->submit_ms);
      if (rate.need() > room) return budget;  // the targets need more: no cap
    }
  return allowance(rate.need());
}

void Scheduler::schedule_prefills(int& budget) {
  prefill_running_.clear();
  for (Sequence* s : running_)
    if (s->scheduled_tokens == 0 && s->remaining() > 1) prefill_running_.push_back(s);
  budget = prefill_allowance(budget);
  // Merge the three ordered sources by priority: running prefills, waiting interactive,
  // waiting bulk. Admission stops at the first waiting sequence that does not fit.
  size_t r = 0;
  bool admitting = true;
  while (budget > 0) {
    while (r < prefill_running_.size() && prefill_running_[r]->status != SeqStatus::kRunning)
      ++r;  // preempted earlier in this step
    Sequence* run = r < prefill_running_.size() ? prefill_running_[r] : nullptr;
    Sequence* wait = nullptr;
    if (admitting) {
      if (!waiting_[0].empty())
        wait = waiting_[0].front();
      else if (!waiting_[1].empty())
        wait = waiting_[1].front();
    }
    if (!run && !wait) break;
    if (run && (!wait || runs_before(*run, *wait))) {
      ++r;
      if (!continue_prefill(run, budget)) break;
    } else {
      if (!admit(wait, budget)) admitting = false;
    }
  }
}

void Scheduler::commit_step() {
  for (Sequence* s : out_.seqs) {
    s->num_computed += s->scheduled_tokens;
    bm_.commit(*s);
  }
}

void Scheduler::end_step() {
  for (Sequence* s : out_.seqs) s->scheduled_tokens = 0;
  out_.clear();
}

const ScheduleOutput& Scheduler::schedule(uint64_t step, double now_ms, double step_ms) {
  end_step();
  now_ms_ = now_ms;
  step_ms_ = step_ms;
  promote(step);
  preempt_for_interactive();
  int budget = cfg_.max_num_batched_tokens;
  schedule_decodes(budget);
  schedule_prefills(budget);
  return out_;
}

}  // namespace tandem::engine
