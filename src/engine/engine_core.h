#pragma once
// The step loop without a thread: requests in, one step at a time, events out. Engine
// (engine.h) runs it on its own thread; tests and the bench drive it directly, so every
// step is deterministic and observable.
//
// One step, in phases (timed in StepTiming; publish and free together):
//   schedule  the Scheduler picks the sequences and their token counts, and assigns blocks
//   prepare   the ForwardBatch, and how its rows get their tokens (StepSampler::prepare)
//   forward   the runner
//   sample    the scheduler records the computed tokens; prompts that completed fork their
//             siblings; every row gets its token, which is appended (stop checks)
//   publish   the step's events go to the request handles
//   free      finished sequences leave the scheduler (their blocks return), finished
//             requests are dropped
// The Scheduler is the only writer of KV block state; the core only reads it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/options.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stats.h"
#include "engine/step_sampler.h"
#include "model/runner.h"

namespace tandem::engine {

class EngineCore {
 public:
  // `runner` must outlive the core.
  EngineCore(model::Runner& runner, const EngineOptions& opt);
  ~EngineCore();

  // Throws Error(kInvalidArgument) for a request that can never run.
  void validate(const Request& r) const;
  // Takes a validated request; its events go to `handle`.
  void add(RequestId id, Request r, std::shared_ptr<RequestHandle> handle);
  // Ends every sample of the request with kCancelled and frees its blocks. Unknown ids are
  // ignored.
  void cancel(RequestId id);
  // Ends every request (engine shutdown).
  void finish_all(FinishReason reason, const std::string& error);
  // After step() threw: ends with kError (and `error`) every request that had a sequence in
  // that step's batch, and leaves the others to run on, so one failed step costs only the
  // requests it carried. A failure before the batch was planned ends every request.
  void fail_step(const std::string& error);

  bool has_work() const { return !requests_.empty(); }
  // Runs one step (nothing when idle). An exception from the runner propagates with the
  // scheduler state intact; the caller then calls fail_step().
  void step();

  EngineStats stats() const;
  const StepTiming& last_timing() const { return last_; }
  const StepTiming& total_timing() const { return total_; }
  // The same sums over the steps that carried no prompt tokens (every row a decode), so a
  // benchmark can tell what the steps that carry prompts cost against the others.
  const StepTiming& decode_only_timing() const { return decode_only_; }
  uint64_t decode_only_steps() const { return decode_only_steps_; }
  const model::ForwardBatch& last_batch() const { return batch_; }
  const BlockManager& block_manager() const { return sched_.blocks(); }
  const Scheduler& scheduler() const { return sched_; }
  int max_model_len() const { return max_model_len_; }
  int vocab_size() const { return vocab_; }
  uint64_t steps() const { return step_; }

 private:
  struct RequestState;
  Sequence* new_sequence(RequestState& rs, int sample);
  void fork_samples(RequestState& rs, Sequence& parent, int row);
  // Appends a sampled token and queues its events; true when the sequence finished.
  bool append_token(RequestState& rs, Sequence& s, TokenId tok, float logprob,
                    std::vector<TopLogprob>&& top);
  void finish(RequestState& rs, Sequence& s, FinishReason reason, const std::string& error = {});
  void end_request(RequestState& rs, FinishReason reason, const std::string& error);
  void drop_step();
  void finish_unforked(RequestState& rs, FinishReason reason, const std::string& error);
  void touch(RequestState& rs);

  // The phases of step(), in order.
  const ScheduleOutput* schedule_phase();  // nullptr: nothing to run
  void prepare_phase(const ScheduleOutput& plan);
  void forward_phase();
  void sample_phase();
  void publish_phase();
  void free_phase();
  void record_timing(const std::chrono::steady_clock::time_point (&t)[6], int num_seqs,
                     int num_decodes, size_t preempted);

  void push_events();             // the queued events to their handles
  void drop_finished_requests();  // requests whose every sample has finished
  double now_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - epoch_)
        .count();
  }

  model::Runner& runner_;
  EngineOptions opt_;
  int vocab_ = 0, max_model_len_ = 0, block_size_ = 0;
  Scheduler sched_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
  std::vector<RequestState*> touched_;  // requests with events to publish this step
  std::vector<Sequence*> finished_;     // to remove after the step
  std::vector<RequestId> in_step_;      // requests of the planned step (fail_step's scope)
  model::ForwardBatch batch_;
  std::vector<int> logit_row_of_;
  std::vector<SampleRow> rows_;         // this step's logits rows, in batch order
  std::vector<RequestState*> row_req_;  // the request of each of rows_
  StepSampler sampler_;
  uint64_t step_ = 0, next_seq_id_ = 1, arrivals_ = 0;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::mt19937_64 unseeded_;  // seeds for requests without a seed
  StepTiming last_, total_, decode_only_;
  uint64_t decode_only_steps_ = 0;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  double step_ms_ = 0;  // moving average of recent step times, for the TTFT target
};

}  // namespace tandem::engine
