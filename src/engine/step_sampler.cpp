#include "engine/step_sampler.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "engine/fast_greedy.h"

namespace tandem::engine {

StepSampler::StepSampler(int vocab, int max_rows, int threads, int mask_threads)
    : vocab_(vocab),
      max_rows_(max_rows),
      pool_(threads),
      mask_words_((vocab + 31) / 32),
      jobs_(mask_threads) {
  runner_masks_.words = mask_words_;
  runner_masks_.wait = [this] {
    jobs_.wait();
    return masks_.data();
  };
}

// Each constrained row's mask, on the mask threads (the forward pass runs meanwhile).
void StepSampler::start_masks(std::span<const SampleRow> rows) {
  jobs_.wait();
  masked_.clear();
  masked_seq_.clear();
  runner_masks_.mask_of_row.assign(batch_rows_, -1);
  for (const SampleRow& sr : rows) {
    if (!sr.seq->constrained()) continue;
    runner_masks_.mask_of_row[size_t(sr.row)] = int32_t(masked_.size());
    masked_.push_back(sr.row);
    masked_seq_.push_back(sr.seq);
  }
  if (masked_.empty()) return;
  masks_.resize(masked_.size() * size_t(mask_words_));
  mask_error_.assign(masked_.size(), {});
  jobs_.start(int(masked_.size()), [this](int j) {
    std::span<uint32_t> m(masks_.data() + size_t(j) * size_t(mask_words_), size_t(mask_words_));
    try {
      structured::Matcher& mt = *masked_seq_[size_t(j)]->constraint.matcher;
      if (mt.vocabulary().mask_words() > mask_words_)
        throw Error(ErrorKind::kInvalidArgument,
                    "the constraint's vocabulary is wider than the model's");
      std::fill(m.begin(), m.end(), 0u);
      mt.fill_mask(m.first(size_t(mt.vocabulary().mask_words())));
      bool any = false;
      for (uint32_t w : m) any = any || w != 0;
      if (!any) throw Error(ErrorKind::kInternal, "no token is allowed");
    } catch (const std::exception& e) {
      mask_error_[size_t(j)] = std::string("constraint: ") + e.what();
      std::fill(m.begin(), m.end(), ~0u);  // any token; the row's result is dropped
    }
  });
}

const uint32_t* StepSampler::mask_of(int row) const {
  const int j = runner_masks_.mask_of_row.empty() ? -1 : runner_masks_.mask_of_row[size_t(row)];
  return j < 0 ? nullptr : masks_.data() + size_t(j) * size_t(mask_words_);
}

SamplePath StepSampler::prepare(const model::Runner& runner, const model::ForwardBatch& batch,
                                std::span<const SampleRow> rows) {
  bool all_greedy = runner.supports_greedy(), can_sample = runner.supports_sampling();
  const bool masks_ok = runner.supports_token_masks();
  for (size_t i = 0; i < rows.size() && (all_greedy || can_sample); ++i) {
    const Sequence& s = *rows[i].seq;
    if (!(s.greedy_only && s.forked)) all_greedy = false;
    if (!s.forked || rows[i].params->top_logprobs >= 0) can_sample = false;
    if (s.constrained() && !masks_ok) all_greedy = can_sample = false;
  }
  path_ = all_greedy   ? SamplePath::kRunnerArgmax
          : can_sample ? SamplePath::kRunnerSample
                       : SamplePath::kHost;
  rows_ = batch.logit_rows.size();
  batch_rows_ = rows_;
  start_masks(rows);
  const size_t need = path_ != SamplePath::kHost ? 0 : rows_ * size_t(vocab_);
  if (logits_cap_ < need) {
    logits_cap_ = std::min(std::max(need, 2 * logits_cap_), size_t(max_rows_) * size_t(vocab_));
    logits_cap_ = std::max(logits_cap_, need);
    logits_.reset(new float[logits_cap_]);
  }
  if (path_ == SamplePath::kRunnerSample) prepare_runner_sampling(rows, rows_);
  return path_;
}

void StepSampler::prepare_runner_sampling(std::span<const SampleRow> rows, size_t num_rows) {
  row_sampling_.assign(num_rows, {});
  penalty_tokens_.clear();
  for (const SampleRow& sr : rows) {
    Sequence& s = *sr.seq;
    const SamplingParams& p = *sr.params;
    model::RowSampling& r = row_sampling_[size_t(sr.row)];
    static_cast<SamplingKnobs&>(r) = p;
    // One draw for a random row, none for a greedy one: the host sampler's consumption.
    const bool greedy = p.temperature < 1e-5f || p.top_k == 1;
    r.uniform = greedy ? 0.0 : s.rng.uniform();
    const bool rep = p.repetition_penalty != 1.0f;
    if (rep || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
      // The window is the last n tokens (prompt and output) for the repetition penalty, of
      // which the output ones also get presence/frequency (engine::sample's rule).
      const size_t n = p.penalty_last_n < 0 ? SIZE_MAX : size_t(p.penalty_last_n);
      const size_t outs = std::min(n, size_t(s.num_output()));
      const size_t len = rep ? std::min(n, s.tokens.size()) : outs;
      r.penalty_offset = int32_t(penalty_tokens_.size());
      r.penalty_count = int32_t(len);
      r.penalty_output = int32_t(outs);
      penalty_tokens_.insert(penalty_tokens_.end(), s.tokens.end() - std::ptrdiff_t(len),
                             s.tokens.end());
    }
  }
}

void StepSampler::forward(model::Runner& runner, const model::ForwardBatch& batch) {
  if (path_ != SamplePath::kHost && !masked_.empty()) {
    runner.set_token_masks(&runner_masks_);
    try {
      forward_on_runner(runner, batch);
    } catch (...) {
      runner.set_token_masks(nullptr);
      jobs_.wait();  // the jobs write into masks_: done before anything else touches it
      throw;
    }
    runner.set_token_masks(nullptr);
    return;
  }
  try {
    forward_on_runner(runner, batch);
  } catch (...) {
    jobs_.wait();
    throw;
  }
}

void StepSampler::forward_on_runner(model::Runner& runner, const model::ForwardBatch& batch) {
  switch (path_) {
    case SamplePath::kRunnerArgmax:
      tokens_.resize(rows_);
      runner.forward_greedy(batch, tokens_);
      break;
    case SamplePath::kRunnerSample:
      tokens_.resize(rows_);
      runner.forward_sample(batch, row_sampling_, penalty_tokens_, tokens_);
      break;
    case SamplePath::kHost:
      runner.forward(batch, std::span<float>(logits_.get(), rows_ * size_t(vocab_)));
      return;
  }
  for (TokenId t : tokens_) TANDEM_CHECK(t >= 0 && t < vocab_);
}

std::span<float> StepSampler::logits_row(int row) {
  TANDEM_CHECK(path_ == SamplePath::kHost && row >= 0 && size_t(row) < rows_);
  return {logits_.get() + size_t(row) * size_t(vocab_), size_t(vocab_)};
}

SampleResult StepSampler::sample_sibling(int row, const SamplingParams& p, Sequence& sibling,
                                         std::string* error) {
  jobs_.wait();
  // A sibling starts where its parent's prompt ends: the parent's mask is its mask.
  const int j = runner_masks_.mask_of_row[size_t(row)];
  if (j >= 0 && sibling.constrained() && !mask_error_[size_t(j)].empty()) {
    if (error) *error = mask_error_[size_t(j)];
    return {};
  }
  const std::span<float> r = logits_row(row);
  row_copy_.assign(r.begin(), r.end());
  return engine::sample(row_copy_, p, sibling.prompt(), sibling.output(), sibling.rng,
                        sibling.constrained() ? mask_of(row) : nullptr);
}

void StepSampler::sample(std::span<SampleRow> rows) {
  jobs_.wait();
  for (size_t j = 0; j < masked_.size(); ++j) {
    if (mask_error_[j].empty()) continue;
    for (SampleRow& sr : rows)
      if (sr.row == masked_[j]) sr.error = mask_error_[j];
  }
  if (path_ != SamplePath::kHost) {
    for (SampleRow& sr : rows) sr.result.token = tokens_[size_t(sr.row)];
    return;
  }
  // Each row with its own logits and its sequence's RNG, so the order does not matter.
  pool_.run(int(rows.size()), [&](int j) {
    SampleRow& sr = rows[size_t(j)];
    if (!sr.error.empty()) return;
    const std::span<float> row = logits_row(sr.row);
    const uint32_t* allowed = mask_of(sr.row);
    if (sr.seq->greedy_only) {
      sr.result.token = allowed ? masked_argmax(row, allowed) : fast_argmax(row);
      sr.result.logprob = 0.0f;  // not asked for
      if (sr.result.token >= 0) return;
    }
    sr.result =
        engine::sample(row, *sr.params, sr.seq->prompt(), sr.seq->output(), sr.seq->rng, allowed);
  });
}

}  // namespace tandem::engine
