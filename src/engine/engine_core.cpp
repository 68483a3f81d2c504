#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "engine/batch_builder.h"
#include "engine/fast_greedy.h"
#include "engine/sampler.h"
#include "engine/schedule_policy.h"
#include "structured/constraint.h"

namespace tandem::engine {

namespace {
using Clock = std::chrono::steady_clock;
double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

SchedulerConfig scheduler_config(const EngineOptions& o, const model::Runner& runner) {
  const int num_blocks = runner.kv_layout().num_blocks;
  SchedulerConfig c;
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.bulk_aging_steps = o.bulk_aging_steps;
  c.decode_step_tokens = effective_decode_step_tokens(o, runner);
  c.ttft_target_ms = o.ttft_target_ms;
  if (!(o.kv_watermark >= 0.0 && o.kv_watermark < 0.5))
    fail(ErrorKind::kInvalidArgument, "kv_watermark {} not in [0, 0.5)", o.kv_watermark);
  c.watermark_blocks = int(std::floor(o.kv_watermark * num_blocks));
  return c;
}

bool contains(const std::vector<TokenId>& v, TokenId t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}
}  // namespace

struct EngineCore::RequestState {
  RequestId id = 0;
  Request req;
  std::shared_ptr<RequestHandle> handle;
  std::vector<std::unique_ptr<Sequence>> samples;  // [0] at submit; the rest at fork
  int unfinished = 0;                              // samples without a finish event
  std::vector<Event> pending;                      // events of this step
  bool touched = false;
};

EngineCore::EngineCore(model::Runner& runner, const EngineOptions& opt)
    : runner_(runner),
      opt_(opt),
      vocab_(runner.vocab_size()),
      block_size_(runner.kv_layout().block_size),
      sched_(scheduler_config(opt, runner), runner.kv_layout().num_blocks,
             runner.kv_layout().block_size, opt.enable_prefix_caching),
      sampler_(vocab_, opt.max_num_seqs,
               opt.sample_threads > 0 ? opt.sample_threads
                                      : std::clamp(int(std::thread::hardware_concurrency()), 1, 8),
               opt.mask_threads >= 0
                   ? opt.mask_threads
                   : std::clamp(int(std::thread::hardware_concurrency()) / 2, 1, 8)),
      unseeded_(std::random_device{}()) {
  if (vocab_ < 1) fail(ErrorKind::kInvalidArgument, "runner has an empty vocabulary");
  if (opt_.max_num_batched_tokens < block_size_)
    fail(ErrorKind::kInvalidArgument, "max_num_batched_tokens ({}) < block size ({})",
         opt_.max_num_batched_tokens, block_size_);
  // A sequence must fit in the cache alone (beside the watermark), or it could never finish.
  const BlockManager& bm = sched_.blocks();
  const int cache_len = (bm.num_blocks() - sched_.config().watermark_blocks) * block_size_;
  max_model_len_ = opt_.max_model_len > 0 ? opt_.max_model_len : runner.max_model_len();
  max_model_len_ = std::min(max_model_len_, cache_len);
  if (max_model_len_ < 2)
    fail(ErrorKind::kResource, "KV cache too small: {} blocks of {} tokens", bm.num_blocks(),
         block_size_);
  for (TokenId t : opt_.eos_ids)
    if (t < 0 || t >= vocab_) fail(ErrorKind::kInvalidArgument, "EOS id {} out of range", t);
}

EngineCore::~EngineCore() = default;

void EngineCore::validate(const Request& r) const {
  if (r.prompt.empty()) fail(ErrorKind::kInvalidArgument, "the prompt is empty");
  if (r.n < 1) fail(ErrorKind::kInvalidArgument, "n must be >= 1, got {}", r.n);
  if (r.max_tokens < 1)
    fail(ErrorKind::kInvalidArgument, "max_tokens must be >= 1, got {}", r.max_tokens);
  const int64_t total = int64_t(r.prompt.size()) + r.max_tokens;
  if (total > max_model_len_)
    fail(ErrorKind::kInvalidArgument,
         "prompt ({} tokens) + max_tokens ({}) exceeds the maximum context length ({})",
         r.prompt.size(), r.max_tokens, max_model_len_);
  for (TokenId t : r.prompt)
    if (t < 0 || t >= vocab_)
      fail(ErrorKind::kInvalidArgument, "token id {} out of range [0, {})", t, vocab_);
  for (TokenId t : r.stop_token_ids)
    if (t < 0 || t >= vocab_)
      fail(ErrorKind::kInvalidArgument, "stop token id {} out of range [0, {})", t, vocab_);
  if (r.constraint) {
    if (!r.constraint->grammar || !r.constraint->vocab)
      fail(ErrorKind::kInvalidArgument, "a constraint without its grammar or vocabulary");
    if (r.constraint->vocab->size() > vocab_)
      fail(ErrorKind::kInvalidArgument,
           "the constraint's vocabulary ({}) is wider than the model's ({})",
           r.constraint->vocab->size(), vocab_);
  }
  engine::validate(r.sampling);
}

Sequence* EngineCore::new_sequence(RequestState& rs, int sample) {
  auto s = std::make_unique<Sequence>();
  s->id = next_seq_id_++;
  s->request = rs.id;
  s->sample = sample;
  s->tokens.reserve(rs.req.prompt.size() + size_t(rs.req.max_tokens));
  s->tokens = rs.req.prompt;
  s->num_prompt = int(rs.req.prompt.size());
  SamplingParams sp = rs.req.sampling;
  if (sp.seed) *sp.seed += uint64_t(sample);  // n samples of one seed differ, reproducibly
  s->rng = make_sequence_rng(sp, unseeded_());
  s->greedy_only = fast_greedy_applies(sp);
  if (const auto& c = rs.req.constraint) {
    s->constraint.matcher = std::make_unique<structured::Matcher>(c->grammar, c->vocab);
    s->constraint.started = c->start_after < 0;
  }
  rs.samples[size_t(sample)] = std::move(s);
  return rs.samples[size_t(sample)].get();
}

void EngineCore::add(RequestId id, Request r, std::shared_ptr<RequestHandle> handle) {
  TANDEM_CHECK(!requests_.contains(id));
  auto rs = std::make_unique<RequestState>();
  rs->id = id;
  rs->req = std::move(r);
  rs->handle = std::move(handle);
  rs->unfinished = rs->req.n;
  {
    std::lock_guard lock(rs->handle->mu_);
    rs->handle->n_ = rs->req.n;
  }
  rs->samples.resize(size_t(rs->req.n));
  prompt_tokens_ += rs->req.prompt.size();
  Sequence* s = new_sequence(*rs, 0);
  s->arrival = arrivals_++;
  s->submit_step = step_;
  s->submit_ms = now_ms();
  s->cls = policy::classify(rs->req.priority, s->num_prompt, opt_.bulk_prompt_threshold);
  s->forked = rs->req.n == 1;
  sched_.add_waiting(s);
  requests_.emplace(id, std::move(rs));
}

void EngineCore::touch(RequestState& rs) {
  if (!rs.touched) {
    rs.touched = true;
    touched_.push_back(&rs);
  }
}

void EngineCore::finish(RequestState& rs, Sequence& s, FinishReason reason,
                        const std::string& error) {
  Event e;
  e.kind = Event::Kind::kFinish;
  e.sample = s.sample;
  e.reason = reason;
  e.error = error;
  e.usage.prompt_tokens = s.num_prompt;
  e.usage.completion_tokens = s.num_output();
  e.usage.cached_tokens = std::max(0, rs.samples[0]->cached_prompt_tokens);
  if (const Sequence& first = *rs.samples[0]; first.admitted_ms >= 0)
    e.usage.queue_ms = first.admitted_ms - first.submit_ms;
  rs.pending.push_back(std::move(e));
  --rs.unfinished;
  touch(rs);
}

// Samples that were never forked (the request ended before its prompt was computed) still
// owe their finish events.
void EngineCore::finish_unforked(RequestState& rs, FinishReason reason, const std::string& error) {
  for (int i = 1; i < rs.req.n; ++i) {
    if (rs.samples[size_t(i)]) continue;
    Event e;
    e.kind = Event::Kind::kFinish;
    e.sample = i;
    e.reason = reason;
    e.error = error;
    e.usage.prompt_tokens = int(rs.req.prompt.size());
    rs.pending.push_back(std::move(e));
    --rs.unfinished;
  }
  rs.samples[0]->forked = true;
  touch(rs);
}

bool EngineCore::append_token(RequestState& rs, Sequence& s, TokenId tok, float logprob,
                              std::vector<TopLogprob>&& top) {
  s.tokens.push_back(tok);
  ++generation_tokens_;
  const Request& r = rs.req;
  if (structured::Matcher* m = s.constraint.matcher.get()) {
    if (!s.constraint.started) {
      s.constraint.started = tok == r.constraint->start_after;  // free until then
    } else if (!m->accept_token(tok)) {
      finish(rs, s, FinishReason::kError, "constraint: the sampled token is not allowed");
      return true;
    } else if (m->ended()) {
      finish(rs, s, FinishReason::kStop);  // complete, and EOS taken (even with ignore_eos)
      return true;
    }
  }
  if ((!r.ignore_eos && contains(opt_.eos_ids, tok)) || contains(r.stop_token_ids, tok)) {
    finish(rs, s, FinishReason::kStop);  // stop tokens count as generated but are not sent
    return true;
  }
  Event e;
  e.kind = Event::Kind::kToken;
  e.sample = s.sample;
  e.token = tok;
  e.logprob = logprob;
  e.top = std::move(top);
  rs.pending.push_back(std::move(e));
  touch(rs);
  if (s.num_output() >= r.max_tokens || s.num_tokens() >= max_model_len_) {
    finish(rs, s, FinishReason::kLength);
    return true;
  }
  return false;
}

void EngineCore::fork_samples(RequestState& rs, Sequence& parent, int row) {
  parent.forked = true;
  for (int i = 1; i < rs.req.n; ++i) {
    Sequence* c = new_sequence(rs, i);
    c->arrival = parent.arrival;
    c->submit_step = parent.submit_step;
    c->submit_ms = parent.submit_ms;
    c->cls = parent.cls;
    c->promoted = parent.promoted;
    c->forked = true;
    c->cached_prompt_tokens = parent.cached_prompt_tokens;
    c->constraint = parent.constraint;  // the state after the prompt
    // Its first token comes from the parent's logits: the prompt is the same.
    std::string error;
    SampleResult sr = sampler_.sample_sibling(row, rs.req.sampling, *c, &error);
    if (!error.empty()) {
      finish(rs, *c, FinishReason::kError, error);
      c->status = SeqStatus::kFinished;
      continue;
    }
    if (append_token(rs, *c, sr.token, sr.logprob, std::move(sr.top))) {
      c->status = SeqStatus::kFinished;  // done at birth: it never holds blocks
      continue;
    }
    sched_.add_fork(parent, c);
  }
}

// Ends every sample of the request that has not ended yet, freeing its blocks.
void EngineCore::end_request(RequestState& rs, FinishReason reason, const std::string& error) {
  for (auto& s : rs.samples) {
    if (!s || s->status == SeqStatus::kFinished) continue;
    sched_.remove(s.get());
    finish(rs, *s, reason, error);
  }
  if (!rs.samples[0]->forked) finish_unforked(rs, reason, error);
}

// Forgets the planned step after it threw, and removes the sequences that ended in it
// before the throw (their finish events are already queued).
void EngineCore::drop_step() {
  sched_.end_step();
  for (Sequence* s : finished_) sched_.remove(s);
  finished_.clear();
  rows_.clear();
  row_req_.clear();
}

void EngineCore::cancel(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  end_request(*it->second, FinishReason::kCancelled, {});
  push_events();
  drop_finished_requests();
}

void EngineCore::finish_all(FinishReason reason, const std::string& error) {
  drop_step();
  in_step_.clear();
  for (auto& [id, rsp] : requests_) end_request(*rsp, reason, error);
  push_events();
  drop_finished_requests();
}

void EngineCore::fail_step(const std::string& error) {
  if (in_step_.empty()) return finish_all(FinishReason::kError, error);
  drop_step();
  std::sort(in_step_.begin(), in_step_.end());
  in_step_.erase(std::unique(in_step_.begin(), in_step_.end()), in_step_.end());
  for (RequestId id : in_step_) {
    auto it = requests_.find(id);
    if (it != requests_.end()) end_request(*it->second, FinishReason::kError, error);
  }
  in_step_.clear();
  push_events();
  drop_finished_requests();
}

void EngineCore::push_events() {
  for (RequestState* rs : touched_) rs->handle->push_many(rs->pending);
}

void EngineCore::drop_finished_requests() {
  for (RequestState* rs : touched_) {
    rs->touched = false;
    if (rs->unfinished == 0) requests_.erase(rs->id);
  }
  touched_.clear();
}

void EngineCore::step() {
  if (requests_.empty()) return;
  Clock::time_point t[6];
  t[0] = Clock::now();
  const ScheduleOutput* plan = schedule_phase();
  t[1] = Clock::now();
  if (!plan) return;
  prepare_phase(*plan);
  t[2] = Clock::now();
  forward_phase();
  t[3] = Clock::now();
  sample_phase();
  t[4] = Clock::now();
  const int num_seqs = int(plan->seqs.size()), num_decodes = plan->num_decodes;
  const size_t preempted = plan->preempted.size();
  publish_phase();
  free_phase();  // clears `plan`
  t[5] = Clock::now();
  record_timing(t, num_seqs, num_decodes, preempted);
}

const ScheduleOutput* EngineCore::schedule_phase() {
  const ScheduleOutput& plan = sched_.schedule(step_, now_ms(), step_ms_);
  ++step_;
  if (plan.seqs.empty()) {
    // Only possible while nothing runs and the head of the queue waits for blocks held by
    // nobody, which the capacity checks rule out; fail loudly rather than spin.
    TANDEM_CHECK(sched_.num_running() > 0 || sched_.num_waiting() == 0);
    return nullptr;
  }
  in_step_.clear();
  for (const Sequence* s : plan.seqs) in_step_.push_back(s->request);
  return &plan;
}

void EngineCore::prepare_phase(const ScheduleOutput& plan) {
  build_forward_batch(plan.seqs, block_size_, batch_, logit_row_of_);
  rows_.clear();
  row_req_.clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const int k = logit_row_of_[i];
    if (k < 0) continue;
    RequestState& rs = *requests_.at(plan.seqs[i]->request);
    rows_.push_back({plan.seqs[i], &rs.req.sampling, k, {}, {}});
    row_req_.push_back(&rs);
  }
  sampler_.prepare(runner_, batch_, rows_);
}

void EngineCore::forward_phase() {
  sampler_.forward(runner_, batch_);
}

// Serial: the computed tokens and blocks, then the forks where a prompt just completed
// (siblings sample from the untouched row before the parent's sampler edits it). Parallel:
// every row's token. Serial again: append, stops, events, in batch order.
void EngineCore::sample_phase() {
  sched_.commit_step();
  for (size_t i = 0; i < rows_.size(); ++i)
    if (!rows_[i].seq->forked) fork_samples(*row_req_[i], *rows_[i].seq, rows_[i].row);
  sampler_.sample(rows_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    SampleRow& r = rows_[i];
    if (!r.error.empty()) {  // its constraint failed: that sequence alone ends
      finish(*row_req_[i], *r.seq, FinishReason::kError, r.error);
      finished_.push_back(r.seq);
      continue;
    }
    if (append_token(*row_req_[i], *r.seq, r.result.token, r.result.logprob,
                     std::move(r.result.top)))
      finished_.push_back(r.seq);
  }
}

void EngineCore::publish_phase() {
  push_events();
}

void EngineCore::free_phase() {
  sched_.end_step();  // clears the plan
  in_step_.clear();
  for (Sequence* s : finished_) sched_.remove(s);
  finished_.clear();
  rows_.clear();
  row_req_.clear();
  drop_finished_requests();
}

void EngineCore::record_timing(const Clock::time_point (&t)[6], int num_seqs, int num_decodes,
                               size_t preempted) {
  last_.num_seqs = num_seqs;
  last_.num_decodes = num_decodes;
  last_.schedule_us = us_between(t[0], t[1]);
  last_.prepare_us = us_between(t[1], t[2]);
  last_.forward_us = us_between(t[2], t[3]);
  last_.sample_us = us_between(t[3], t[4]);
  last_.publish_us = us_between(t[4], t[5]);
  last_.num_tokens = batch_.num_tokens();
  total_.add(last_);
  if (last_.num_tokens > 0 && last_.num_tokens == last_.num_decodes) {
    decode_only_.add(last_);
    ++decode_only_steps_;
  }
  const double ms = us_between(t[0], t[5]) / 1000.0;
  step_ms_ = step_ms_ > 0 ? 0.8 * step_ms_ + 0.2 * ms : ms;
  if (preempted) spdlog::debug("engine step {}: preempted {} sequences", step_, preempted);
  spdlog::debug(
      "engine step {}: {} seqs ({} decode), {} tokens; us: schedule {:.0f} prepare {:.0f} "
      "forward {:.0f} sample {:.0f} publish {:.0f}",
      step_, last_.num_seqs, last_.num_decodes, last_.num_tokens, last_.schedule_us,
      last_.prepare_us, last_.forward_us, last_.sample_us, last_.publish_us);
}

EngineStats EngineCore::stats() const {
  EngineStats st;
  st.running = sched_.num_running();
  st.waiting = sched_.num_waiting();
  st.kv_usage = double(sched_.blocks().num_used()) / double(sched_.blocks().num_blocks());
  st.prompt_tokens = prompt_tokens_;
  st.generation_tokens = generation_tokens_;
  st.preemptions = sched_.counters().preemptions;
  st.prefix_cache_queries = sched_.counters().prefix_queries;
  st.prefix_cache_hits = sched_.counters().prefix_hits;
  st.steps = step_;
  return st;
}

}  // namespace tandem::engine
