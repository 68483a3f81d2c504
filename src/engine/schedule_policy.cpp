#include "engine/schedule_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::engine::policy {

int prefill_chunk(int num_computed, int num_tokens, int budget, int block_size) {
  const int remaining = num_tokens - num_computed;
  if (remaining <= 0 || budget <= 0) return 0;
  if (remaining <= budget) return remaining;
  const int end = (num_computed + budget) / block_size * block_size;
  return end > num_computed ? end - num_computed : 0;
}

PrefillRate::PrefillRate(double ttft_target_ms, double step_ms)
    : target_ms_(ttft_target_ms), step_ms_(step_ms > 0 ? step_ms : 1.0) {}

void PrefillRate::add(int tokens, double age_ms) {
  ahead_ += tokens;
  const double steps_left = std::max(1.0, std::floor((target_ms_ - age_ms) / step_ms_));
  const double rate = std::ceil(double(ahead_) / steps_left);
  need_ = int(std::min(std::max(rate, double(need_)), double(std::numeric_limits<int>::max())));
}

int prefill_allowance(int budget, int step_tokens, int num_decodes, int knee, int need) {
  if (knee <= 0 || num_decodes == 0) return budget;
  const int spare = knee - step_tokens;
  if (spare <= 0 || need > spare) return budget;
  return std::min(spare, budget);
}

SeqClass classify(Priority p, int prompt_len, int bulk_threshold) {
  switch (p) {
    case Priority::kInteractive:
      return SeqClass::kInteractive;
    case Priority::kBulk:
      return SeqClass::kBulk;
    case Priority::kAuto:
      break;
  }
  return prompt_len > bulk_threshold ? SeqClass::kBulk : SeqClass::kInteractive;
}

bool should_promote(const Sequence& s, uint64_t step, int aging_steps) {
  return s.cls == SeqClass::kBulk && !s.promoted && step >= s.submit_step &&
         step - s.submit_step >= uint64_t(aging_steps);
}

Sequence* pick_victim(std::span<Sequence* const> running, const Sequence& for_seq) {
  const bool waiting = for_seq.status != SeqStatus::kRunning;
  for (auto it = running.rbegin(); it != running.rend(); ++it) {
    Sequence* v = *it;
    if (v->scheduled_tokens > 0) continue;
    if (v == &for_seq) return v;  // everything below it is scheduled: it yields
    if (waiting) return v->rank() > for_seq.rank() ? v : nullptr;
    return runs_before(for_seq, *v) ? v : const_cast<Sequence*>(&for_seq);
  }
  return waiting ? nullptr : const_cast<Sequence*>(&for_seq);
}

}  // namespace tandem::engine::policy
