#pragma once
// How the rows of one step get their tokens: the prepare, forward and sample phases of
// EngineCore::step for everything that concerns sampling. A row is a sequence whose
// scheduled tokens end in a logits row this step (ForwardBatch::logit_rows).
//
// One path for the whole step:
//   kRunnerArgmax  every row is greedy and asks for nothing else: the runner returns
//                  token ids (Runner::forward_greedy).
//   kRunnerSample  the runner runs the whole sampler (Runner::forward_sample), with each
//                  random row's uniform drawn here from its sequence's RNG, exactly as the
//                  host sampler would consume it.
//   kHost          the runner returns fp32 logits [rows, vocab]; the rows are sampled here
//                  in parallel (engine::sample, or the argmax shortcut for greedy rows).
// A row that asks for logprobs, or whose prompt is about to fork (its siblings sample from
// the same row), takes the step to the host path.
//
// Token masks (constrained rows, Sequence::constrained()): prepare() starts computing them
// on MaskJobs threads, so they are made while the forward pass runs. The host path applies
// each row's mask in the sampler; the runner paths pass them to a runner that takes token
// masks (Runner::set_token_masks), and a step with a constrained row goes to the host path
// on a runner that does not. A row whose mask fails gets `error` and no token.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/mask_jobs.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "engine/worker_pool.h"
#include "model/runner.h"

namespace tandem::engine {

enum class SamplePath { kHost, kRunnerArgmax, kRunnerSample };

struct SampleRow {
  Sequence* seq = nullptr;
  const SamplingParams* params = nullptr;
  int row = 0;             // index into ForwardBatch::logit_rows
  SampleResult result;     // sample() writes it
  std::string error = {};  // set instead when the row's constraint failed
};

class StepSampler {
 public:
  // `max_rows`: the most logits rows a step can have (the engine's max_num_seqs), which
  // bounds the logits buffer's growth. `threads`: as WorkerPool (<= 1: the caller alone).
  // `mask_threads`: MaskJobs threads (0: masks computed when they are waited for).
  StepSampler(int vocab, int max_rows, int threads, int mask_threads = 0);

  // Prepare phase. Chooses the path for this step's rows (in batch order) and readies what
  // it needs: the logits buffer (host), or each row's settings, draw and penalty window
  // (runner sampling: one uniform is taken from each random row's RNG here).
  SamplePath prepare(const model::Runner& runner, const model::ForwardBatch& batch,
                     std::span<const SampleRow> rows);
  // Forward phase: the runner call of the path. Exceptions from the runner propagate.
  void forward(model::Runner& runner, const model::ForwardBatch& batch);
  // Sample phase: every row's token (and its logprobs where asked) into rows[i].result.
  void sample(std::span<SampleRow> rows);
  // Host path only: the first token of a forked sibling, sampled from a copy of the
  // parent's row (call before sample(), which edits the rows in place). `*error` is set
  // (and no token sampled) when the row's constraint failed.
  SampleResult sample_sibling(int row, const SamplingParams& p, Sequence& sibling,
                              std::string* error = nullptr);

  SamplePath path() const { return path_; }
  int masked_rows() const { return int(masked_.size()); }

 private:
  std::span<float> logits_row(int row);
  void prepare_runner_sampling(std::span<const SampleRow> rows, size_t num_rows);
  void start_masks(std::span<const SampleRow> rows);
  void forward_on_runner(model::Runner& runner, const model::ForwardBatch& batch);
  const uint32_t* mask_of(int row) const;  // null: unmasked

  int vocab_, max_rows_;
  SamplePath path_ = SamplePath::kHost;
  size_t rows_ = 0;  // logits rows of this step
  size_t batch_rows_ = 0;
  std::unique_ptr<float[]> logits_;  // [rows, vocab]; grown geometrically, never zero-filled
  size_t logits_cap_ = 0;
  std::vector<float> row_copy_;
  std::vector<TokenId> tokens_;                   // [rows] when the runner picked them
  std::vector<model::RowSampling> row_sampling_;  // [rows] for forward_sample
  std::vector<TokenId> penalty_tokens_;           // their penalty windows
  WorkerPool pool_;
  // Masks of this step: masked_[j] is the logits row of mask j; masks_ [masked, words].
  int mask_words_;
  std::vector<int> masked_;
  std::vector<Sequence*> masked_seq_;
  std::vector<uint32_t> masks_;
  std::vector<std::string> mask_error_;  // per mask
  model::TokenMasks runner_masks_;       // mask_of_row: [logits rows]
  MaskJobs jobs_;
};

}  // namespace tandem::engine
