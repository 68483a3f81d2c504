#pragma once
// The step loop without a thread: requests in, one step at a time, events out. Engine
// (engine.h) runs it on its own thread; tests and the bench drive it directly, so every
// step is deterministic and observable.
//
// One step: schedule -> build the ForwardBatch -> runner.forward -> sample each row that
// completes a sequence's tokens -> append, check stops -> publish events to the handles ->
// free finished sequences. Each phase is timed (StepTiming).
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/worker_pool.h"

namespace tandem::engine {

struct StepTiming {  // microseconds of one step, by phase
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

// The decode_step_tokens the scheduler uses: the option, or the runner's step_knee() when the
// option is < 0.
inline int effective_decode_step_tokens(const EngineOptions& o, const model::Runner& runner) {
  return o.decode_step_tokens < 0 ? runner.step_knee() : o.decode_step_tokens;
}

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
  const BlockManager& block_manager() const { return bm_; }
  const Scheduler& scheduler() const { return sched_; }
  int max_model_len() const { return max_model_len_; }
  int vocab_size() const { return vocab_; }
  uint64_t steps() const { return step_; }

 private:
  struct RequestState;
  Sequence* new_sequence(RequestState& rs, int sample);
  void fork_samples(RequestState& rs, Sequence& parent, std::span<const float> row);
  // Appends a sampled token and queues its events; true when the sequence finished.
  bool append_token(RequestState& rs, Sequence& s, TokenId tok, float logprob,
                    std::vector<TopLogprob>&& top);
  void finish(RequestState& rs, Sequence& s, FinishReason reason, const std::string& error = {});
  void end_request(RequestState& rs, FinishReason reason, const std::string& error);
  void drop_step();
  void finish_unforked(RequestState& rs, FinishReason reason, const std::string& error);
  void touch(RequestState& rs);
  void sample_rows();  // jobs_ from their logits rows, in parallel
  // row_sampling_ and penalty_tokens_ of this step's rows for Runner::forward_sample (takes
  // each random row's draw from its sequence's RNG).
  void prepare_row_sampling(const std::vector<Sequence*>& seqs);
  void publish();
  double now_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - epoch_)
        .count();
  }

  model::Runner& runner_;
  EngineOptions opt_;
  int vocab_ = 0, max_model_len_ = 0, block_size_ = 0;
  BlockManager bm_;
  Scheduler sched_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
  std::vector<RequestState*> touched_;  // requests with events to publish this step
  std::vector<Sequence*> finished_;     // to remove after the step
  std::vector<RequestId> in_step_;      // requests of the planned step (fail_step's scope)
  model::ForwardBatch batch_;
  std::vector<int> logit_row_of_;
  std::unique_ptr<float[]> logits_;  // [rows, vocab]; grown geometrically, never zero-filled
  size_t logits_cap_ = 0;
  std::vector<float> row_copy_;
  std::vector<TokenId> greedy_tokens_;  // [rows] when the runner did the argmax or sampled
  std::vector<model::RowSampling> row_sampling_;  // [rows] for forward_sample
  std::vector<TokenId> penalty_tokens_;           // their penalty windows
  struct SampleJob {
    Sequence* seq;
    RequestState* rs;
    int row;
    SampleResult result;
  };
  std::vector<SampleJob> jobs_;
  WorkerPool pool_;
  uint64_t step_ = 0, next_seq_id_ = 1, arrivals_ = 0;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::mt19937_64 unseeded_;  // seeds for requests without a seed
  StepTiming last_, total_, decode_only_;
  uint64_t decode_only_steps_ = 0;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  double step_ms_ = 0;  // moving average of recent step times, for the TTFT target
};

}  // namespace tandem::engine
