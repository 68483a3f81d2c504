#include "engine/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"

namespace tandem::engine {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::vector<TokenId> random_tokens(Rng& rng, int n, int vocab) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (auto& x : t) x = TokenId(rng.next() % uint64_t(vocab));
  return t;
}

struct Client {
  std::shared_ptr<RequestHandle> h;
  Clock::time_point submitted, last_token;
  int sent = 0;
  bool got_first = false;
};

class Level {
 public:
  Level(model::Runner& runner, const EngineBenchOptions& opt, int c)
      : opt_(opt), rng_(opt.seed * 7919 + uint64_t(c)) {
    EngineOptions eo = opt.engine;
    eo.max_num_seqs = std::max(eo.max_num_seqs, c);
    eo.max_num_batched_tokens = std::max(eo.max_num_batched_tokens, eo.max_num_seqs);
    core_ = std::make_unique<EngineCore>(runner, eo);
    vocab_ = core_->vocab_size();
    if (opt.shared_prefix_len > 0) system_ = random_tokens(rng_, opt.shared_prefix_len, vocab_);
  }

  Request next_request() {
    Request r;
    if (opt_.shared_prefix_len > 0) {
      r.prompt = system_;
      auto q = random_tokens(rng_, opt_.question_len, vocab_);
      r.prompt.insert(r.prompt.end(), q.begin(), q.end());
    } else {
      r.prompt = random_tokens(rng_, opt_.prompt_len, vocab_);
    }
    r.max_tokens = opt_.output_len;
    r.ignore_eos = true;
    r.sampling.temperature = opt_.temperature;
    r.sampling.top_p = opt_.top_p;
    r.sampling.top_k = opt_.top_k;
    core_->validate(r);
    return r;
  }

  void submit(Client& c) {
    c.h = std::make_shared<RequestHandle>(next_id_);
    core_->add(next_id_++, next_request(), c.h);
    c.submitted = Clock::now();
    c.got_first = false;
    ++c.sent;
  }

  // One request alone on an empty engine: its TTFT.
  double solo_ttft_ms() {
    Client c;
    submit(c);
    double ttft = -1;
    std::vector<Event> evs;
    while (core_->has_work()) {
      core_->step();
      const auto now = Clock::now();
      evs.clear();
      c.h->drain(evs);
      for (auto& e : evs)
        if (e.kind == Event::Kind::kToken && ttft < 0) ttft = ms_between(c.submitted, now);
    }
    return ttft;
  }

  EngineBenchRow run(int concurrency) {
    const auto base_steps = core_->steps();
    const auto base_timing = core_->total_timing();
    const auto base_decode_only = core_->decode_only_timing();
    const auto base_decode_only_steps = core_->decode_only_steps();
    const auto base_stats = core_->stats();
    std::vector<Client> clients(static_cast<size_t>(concurrency));
    std::vector<double> ttft, ttft_steady, itl;
    uint64_t out_tokens = 0;
    const auto t0 = Clock::now();
    // Client i starts at i/C of the ramp (all at once without one).
    std::vector<Clock::time_point> start(clients.size());
    for (size_t i = 0; i < clients.size(); ++i)
      start[i] = t0 + std::chrono::microseconds(
                          int64_t(opt_.ramp_ms * 1000.0 * double(i) / double(clients.size())));
    size_t started = 0;
    // Every step's end, tokens and sequences: the steady window is cut from them at the end.
    struct StepMark {
      Clock::time_point t;
      uint32_t tokens, seqs;
    };
    std::vector<StepMark> marks;
    Clock::time_point all_started{}, first_done{};  // zero until they happen
    auto start_due = [&] {
      const auto now = Clock::now();
      while (started < clients.size() && start[started] <= now) submit(clients[started++]);
      if (started == clients.size() && all_started == Clock::time_point{}) all_started = now;
    };
    start_due();
    int active = concurrency;
    std::vector<Event> evs;
    while (active > 0) {
      start_due();
      if (!core_->has_work()) {
        TANDEM_CHECK(started < clients.size());  // else every client would be done
        std::this_thread::sleep_until(start[started]);
        continue;
      }
      const uint64_t seqs_before = core_->total_timing().num_seqs;
      core_->step();
      const auto now = Clock::now();
      marks.push_back({now, 0, uint32_t(core_->total_timing().num_seqs - seqs_before)});
      for (auto& c : clients) {
        if (!c.h) continue;
        evs.clear();
        c.h->drain(evs);
        bool done = false;
        for (auto& e : evs) {
          if (e.kind == Event::Kind::kFinish) {
            done = true;
            continue;
          }
          ++out_tokens;
          ++marks.back().tokens;
          if (!c.got_first) {
            c.got_first = true;
            ttft.push_back(ms_between(c.submitted, now));
            if (c.sent > 1) ttft_steady.push_back(ttft.back());
          } else {
            itl.push_back(ms_between(c.last_token, now));
          }
          c.last_token = now;
        }
        if (!done) continue;
        if (c.sent < opt_.requests_per_client) {
          submit(c);
        } else {
          c.h.reset();
          --active;
          if (first_done == Clock::time_point{}) first_done = now;
        }
      }
    }
    const double wall = ms_between(t0, Clock::now()) / 1000.0;
    EngineBenchRow row;
    row.scenario = opt_.shared_prefix_len > 0 ? "shared-prefix" : "random";
    row.concurrency = concurrency;
    row.requests = concurrency * opt_.requests_per_client;
    row.output_tokens = out_tokens;
    row.wall_s = wall;
    row.output_tok_s = wall > 0 ? double(out_tokens) / wall : 0;
    row.ttft_p50_ms = percentile(ttft, 50);
    row.ttft_p99_ms = percentile(ttft, 99);
    row.ttft_steady_p99_ms = percentile(ttft_steady, 99);
    if (first_done > all_started) {
      uint64_t steps_in = 0, seqs_in = 0;
      for (const auto& m : marks) {
        if (m.t <= all_started || m.t > first_done) continue;
        row.steady_tokens += m.tokens;
        seqs_in += m.seqs;
        ++steps_in;
      }
      row.steady_s = ms_between(all_started, first_done) / 1000.0;
      row.steady_tok_s = double(row.steady_tokens) / row.steady_s;
      row.steady_seqs = steps_in ? double(seqs_in) / double(steps_in) : 0;
    }
    row.itl_p50_ms = percentile(itl, 50);
    row.itl_p99_ms = percentile(itl, 99);
    const auto st = core_->stats();
    const uint64_t q = st.prefix_cache_queries - base_stats.prefix_cache_queries;
    row.prefix_hit_rate =
        q ? double(st.prefix_cache_hits - base_stats.prefix_cache_hits) / double(q) : 0;
    row.steps = core_->steps() - base_steps;
    row.preemptions = st.preemptions - base_stats.preemptions;
    StepTiming t = core_->total_timing();
    const double n = double(std::max<uint64_t>(row.steps, 1));
    row.mean_step.schedule_us = (t.schedule_us - base_timing.schedule_us) / n;
    row.mean_step.prepare_us = (t.prepare_us - base_timing.prepare_us) / n;
    row.mean_step.forward_us = (t.forward_us - base_timing.forward_us) / n;
    row.mean_step.sample_us = (t.sample_us - base_timing.sample_us) / n;
    row.mean_step.publish_us = (t.publish_us - base_timing.publish_us) / n;
    row.mean_step.num_seqs = int(double(t.num_seqs - base_timing.num_seqs) / n);
    row.mean_step.num_tokens = int(double(t.num_tokens - base_timing.num_tokens) / n);
    row.mean_step.num_decodes = int(double(t.num_decodes - base_timing.num_decodes) / n);
    const double total = row.mean_step.total_us();
    row.engine_cpu_fraction = total > 0 ? row.mean_step.cpu_us() / total : 0;
    row.decode_only_steps = core_->decode_only_steps() - base_decode_only_steps;
    row.prompt_steps = row.steps - row.decode_only_steps;
    const double fwd_all = t.forward_us - base_timing.forward_us;
    const double fwd_dec = core_->decode_only_timing().forward_us - base_decode_only.forward_us;
    if (row.decode_only_steps)
      row.decode_only_forward_ms = fwd_dec / 1e3 / double(row.decode_only_steps);
    if (row.prompt_steps)
      row.prompt_step_forward_ms = (fwd_all - fwd_dec) / 1e3 / double(row.prompt_steps);
    row.prompt_forward_share = fwd_all > 0 ? (fwd_all - fwd_dec) / fwd_all : 0;
    return row;
  }

 private:
  const EngineBenchOptions& opt_;
  Rng rng_;
  std::unique_ptr<EngineCore> core_;
  int vocab_ = 0;
  RequestId next_id_ = 1;
  std::vector<TokenId> system_;
};
}  // namespace

namespace {
// The runner it wraps, minus its sampler: for --host-sampling comparisons.
class HostSamplingRunner : public model::Runner {
 public:
  explicit HostSamplingRunner(model::Runner& r) : r_(r) {}
  int vocab_size() const override { return r_.vocab_size(); }
  int max_model_len() const override { return r_.max_model_len(); }
  model::KvLayout kv_layout() const override { return r_.kv_layout(); }
  std::string name() const override { return r_.name(); }
  int step_knee() const override { return r_.step_knee(); }
  void forward(const model::ForwardBatch& b, std::span<float> logits) override {
    r_.forward(b, logits);
  }
  bool supports_greedy() const override { return r_.supports_greedy(); }
  void forward_greedy(const model::ForwardBatch& b, std::span<TokenId> tokens) override {
    r_.forward_greedy(b, tokens);
  }

 private:
  model::Runner& r_;
};

class NullRunner : public model::Runner {
 public:
  NullRunner(int vocab, int block_size, int num_blocks, bool greedy)
      : vocab_(vocab), greedy_(greedy) {
    layout_.num_layers = 1;
    layout_.num_kv_heads = 1;
    layout_.head_dim = 1;
    layout_.block_size = block_size;
    layout_.num_blocks = num_blocks;
  }
  int vocab_size() const override { return vocab_; }
  int max_model_len() const override { return layout_.num_blocks * layout_.block_size; }
  model::KvLayout kv_layout() const override { return layout_; }
  std::string name() const override { return "null"; }
  void forward(const model::ForwardBatch& b, std::span<float> logits) override {
    for (size_t k = 0; k < b.logit_rows.size(); ++k) {
      uint32_t x = 2166136261u ^ uint32_t(b.tokens[size_t(b.logit_rows[k])]);
      float* row = logits.data() + k * size_t(vocab_);
      for (int v = 0; v < vocab_; ++v) {
        x = x * 1664525u + 1013904223u;
        row[v] = float(x >> 8) * 1e-7f;
      }
    }
  }
  bool supports_greedy() const override { return greedy_; }
  void forward_greedy(const model::ForwardBatch& b, std::span<TokenId> tokens) override {
    for (size_t k = 0; k < b.logit_rows.size(); ++k)
      tokens[k] =
          TokenId(uint32_t(b.tokens[size_t(b.logit_rows[k])]) * 2654435761u % uint32_t(vocab_));
  }

 private:
  int vocab_;
  bool greedy_;
  model::KvLayout layout_;
};
}  // namespace

std::unique_ptr<model::Runner> make_null_runner(int vocab, int block_size, int num_blocks,
                                                bool greedy) {
  if (vocab < 1 || block_size < 1 || num_blocks < 1)
    fail(ErrorKind::kInvalidArgument, "null runner: vocab, block size and blocks must be >= 1");
  return std::make_unique<NullRunner>(vocab, block_size, num_blocks, greedy);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * double(v.size()));
  const size_t i = size_t(std::clamp(rank, 1.0, double(v.size()))) - 1;
  return v[i];
}

std::vector<EngineBenchRow> run_engine_bench(model::Runner& runner, const EngineBenchOptions& opt) {
  if (opt.concurrency.empty()) fail(ErrorKind::kInvalidArgument, "no concurrency levels");
  for (int c : opt.concurrency)
    if (c < 1) fail(ErrorKind::kInvalidArgument, "concurrency {} < 1", c);
  if (!(opt.ramp_ms >= 0)) fail(ErrorKind::kInvalidArgument, "ramp_ms must be >= 0");
  if (opt.output_len < 1 || opt.requests_per_client < 1)
    fail(ErrorKind::kInvalidArgument, "output_len and requests_per_client must be >= 1");
  if (opt.shared_prefix_len > 0 ? opt.question_len < 1 : opt.prompt_len < 1)
    fail(ErrorKind::kInvalidArgument, "prompt length must be >= 1");
  if (!(opt.temperature >= 0.0f) || !(opt.top_p > 0.0f && opt.top_p <= 1.0f) || opt.top_k < 0)
    fail(ErrorKind::kInvalidArgument,
         "bench sampling: temperature >= 0, top_p in (0, 1], top_k >= 0");
  HostSamplingRunner host_sampling(runner);
  model::Runner& used = opt.host_sampling ? static_cast<model::Runner&>(host_sampling) : runner;
  std::vector<EngineBenchRow> rows;
  for (int c : opt.concurrency) {
    Level level(used, opt, c);
    double cold = 0;
    if (opt.shared_prefix_len > 0) cold = level.solo_ttft_ms();  // fills the cache
    EngineBenchRow row = level.run(c);
    row.cold_ttft_ms = cold;
    rows.push_back(row);
  }
  return rows;
}

std::string format_engine_bench(const std::vector<EngineBenchRow>& rows) {
  std::string s =
      fmt::format("{:<14} {:>5} {:>6} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>6}\n",
                  "scenario", "C", "reqs", "out tok/s", "TTFT p50", "TTFT p99", "steady99",
                  "ITL p50", "ITL p99", "cold", "hit%");
  for (const auto& r : rows)
    s += fmt::format(
        "{:<14} {:>5} {:>6} {:>10.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.2f} {:>8.2f} {:>8.1f} "
        "{:>6.1f}\n",
        r.scenario, r.concurrency, r.requests, r.output_tok_s, r.ttft_p50_ms, r.ttft_p99_ms,
        r.ttft_steady_p99_ms, r.itl_p50_ms, r.itl_p99_ms, r.cold_ttft_ms,
        100.0 * r.prefix_hit_rate);
  s += fmt::format(
      "\nsteady window (every client with a request in flight)\n"
      "{:<14} {:>5} {:>9} {:>9} {:>10} {:>7}\n",
      "scenario", "C", "seconds", "tokens", "out tok/s", "seqs");
  for (const auto& r : rows)
    s += fmt::format("{:<14} {:>5} {:>9.2f} {:>9} {:>10.1f} {:>7.1f}\n", r.scenario, r.concurrency,
                     r.steady_s, r.steady_tokens, r.steady_tok_s, r.steady_seqs);
  s += fmt::format(
      "\nper step (mean, us)\n{:<14} {:>5} {:>6} {:>6} {:>9} {:>9} {:>10} {:>9} {:>9} {:>7} "
      "{:>7}\n",
      "scenario", "C", "seqs", "tokens", "schedule", "prepare", "forward", "sample", "publish",
      "cpu%", "preempt");
  for (const auto& r : rows) {
    const auto& m = r.mean_step;
    s += fmt::format(
        "{:<14} {:>5} {:>6} {:>6} {:>9.1f} {:>9.1f} {:>10.1f} {:>9.1f} {:>9.1f} {:>7.1f} {:>7}\n",
        r.scenario, r.concurrency, m.num_seqs, m.num_tokens, m.schedule_us, m.prepare_us,
        m.forward_us, m.sample_us, m.publish_us, 100.0 * r.engine_cpu_fraction, r.preemptions);
  }
  s += fmt::format(
      "\nsteps with prompt tokens against decode-only steps (forward time)\n"
      "{:<14} {:>5} {:>9} {:>10} {:>9} {:>10} {:>12}\n",
      "scenario", "C", "w/prompt", "ms each", "dec-only", "ms each", "prompt fwd%");
  for (const auto& r : rows)
    s += fmt::format("{:<14} {:>5} {:>9} {:>10.2f} {:>9} {:>10.2f} {:>12.1f}\n", r.scenario,
                     r.concurrency, r.prompt_steps, r.prompt_step_forward_ms, r.decode_only_steps,
                     r.decode_only_forward_ms, 100.0 * r.prompt_forward_share);
  return s;
}

}  // namespace tandem::engine
