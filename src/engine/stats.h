#pragma once
// What the engine reports: counters for the front tier (EngineStats) and the time of each
// phase of a step (StepTiming) for the bench and the debug log.
#include <cstdint>
#include <string>

namespace tandem::engine {

struct EngineStats {
  int running = 0;
  int waiting = 0;
  double kv_usage = 0.0;  // fraction of KV blocks in use, 0..1
  uint64_t prompt_tokens = 0, generation_tokens = 0, preemptions = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // in tokens
  uint64_t steps = 0;
  // Steps that threw (each ended the requests it carried), all told and in a row up to the
  // last step run (0 once a step succeeds), and the last one's message.
  uint64_t failed_steps = 0;
  int failing_steps = 0;
  std::string last_error;
};

// Microseconds of one step, by phase (EngineCore::step). `sample_us` covers choosing the
// rows' tokens and appending them (stop checks included); `publish_us` covers handing the
// events to the handles and freeing what finished.
struct StepTiming {
  double schedule_us = 0, prepare_us = 0, forward_us = 0, sample_us = 0, publish_us = 0;
  int num_seqs = 0, num_tokens = 0, num_decodes = 0;
  double total_us() const { return schedule_us + prepare_us + forward_us + sample_us + publish_us; }
  double cpu_us() const { return total_us() - forward_us; }  // engine time around the model
  void add(const StepTiming& o) {
    schedule_us += o.schedule_us;
    prepare_us += o.prepare_us;
    forward_us += o.forward_us;
    sample_us += o.sample_us;
    publish_us += o.publish_us;
    num_seqs += o.num_seqs;
    num_tokens += o.num_tokens;
    num_decodes += o.num_decodes;
  }
};

}  // namespace tandem::engine
