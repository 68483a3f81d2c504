#include "server/generation.h"

#include "server/api_error.h"
#include "server/reasoning_parser.h"
#include "server/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace tandem::server {

namespace {
constexpr std::string_view kForcedClose = "\n</think>\n\n";
int64_t ns_between(std::chrono::steady_clock::time_point a,
                   std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}
}  // namespace

struct Generation::Sample {
  int index = 0;
  std::vector<engine::TokenId> prompt;  // as first submitted
  std::shared_ptr<engine::RequestHandle> h;
  std::unique_ptr<tok::StreamDecoder> dec;
  StopMatcher stop;
  ReasoningParser reason;
  ToolCallParser tools;
  std::vector<engine::TokenId> generated;
  engine::SamplingParams sampling;
  int max_tokens = 0;
  int think_tokens = 0;
  bool budget_forced = false;
  bool resubmit = false;  // cancelled to force </think>; continue when its finish arrives
  bool stopped = false;   // a stop string matched
  bool done = false;
  bool first_submit = true;
  Sample(std::vector<std::string> stops, bool in_think)
      : stop(std::move(stops)), reason(in_think) {}
};

Generation::Generation(const ServerContext& ctx, const GenRequest& req)
    : ctx_(ctx), req_(req), prep_(prepare(req, ctx)), t0_(std::chrono::steady_clock::now()) {
  for (size_t p = 0; p < prep_.prompts.size(); ++p) {
    for (int j = 0; j < req_.n; ++j) {
      auto s = std::make_unique<Sample>(req_.stop, prep_.in_think);
      s->index = int(samples_.size());
      s->prompt = prep_.prompts[p];
      s->dec = std::make_unique<tok::StreamDecoder>(ctx_.tok, /*skip_special=*/true);
      s->sampling = prep_.sampling;
      if (s->sampling.seed) s->sampling.seed = *s->sampling.seed + uint64_t(j);
      s->max_tokens = prep_.max_tokens;
      samples_.push_back(std::move(s));
    }
  }
  // OpenAI counts each distinct prompt once, however many choices share it.
  for (auto& p : prep_.prompts) totals_.prompt_tokens += int(p.size());
  if (prep_.thinking_budget >= 0) close_think_ids_ = ctx_.tok->encode(kForcedClose, true);
}

Generation::~Generation() {
  cancel();
}

void Generation::submit(Sample& s, std::vector<engine::TokenId> prompt, int max_tokens) {
  engine::Request r;
  r.prompt = std::move(prompt);
  r.sampling = s.sampling;
  r.max_tokens = max_tokens;
  r.stop_token_ids = prep_.stop_ids;
  r.ignore_eos = req_.ignore_eos;
  try {
    s.h = ctx_.gen->submit(std::move(r));
  } catch (const Error& e) {
    throw ApiError(status_of(e.kind()), openai_type_of(status_of(e.kind())), "", e.what());
  }
  s.h->set_notifier(notify_);
}

void Generation::start(std::function<void()> notify) {
  notify_ = std::move(notify);
  auto st = ctx_.gen->stats();
  if (st.waiting >= ctx_.opt.max_waiting)
    throw ApiError(
        429, "rate_limit_exceeded", "",
        "the server is busy (" + std::to_string(st.waiting) + " requests waiting); retry shortly");
  t_submit_ = std::chrono::steady_clock::now();
  for (auto& s : samples_) submit(*s, s->prompt, s->max_tokens);
}

void Generation::cancel() {
  for (auto& s : samples_)
    if (s->h && !s->done) {
      s->h->set_notifier(nullptr);
      ctx_.gen->cancel(s->h->id());
    }
}

bool Generation::finished() const {
  for (auto& s : samples_)
    if (!s->done) return false;
  return true;
}

bool Generation::poll(std::vector<ChoiceDelta>& out) {
  for (auto& s : samples_) {
    if (s->done || !s->h) continue;
    ChoiceDelta d;
    d.index = s->index;
    // The prefill (a forced tool call's start) goes through the parsers before any token.
    if (s->first_submit) {
      s->first_submit = false;
      if (!prep_.prefill.empty()) route(*s, prep_.prefill, d);
    }
    handle_events(*s, d);
    if (d.finish && s->index == 0) finish_ = d.finish;
    if (!d.empty()) out.push_back(std::move(d));
  }
  bool all = finished();
  if (all) {
    auto now = std::chrono::steady_clock::now();
    totals_.total_ns = ns_between(t0_, now);
    totals_.prompt_eval_ns = any_token_ ? ns_between(t0_, t_first_) : totals_.total_ns;
    totals_.eval_ns = any_token_ ? ns_between(t_first_, now) : 0;
  }
  return all;
}

void Generation::handle_events(Sample& s, ChoiceDelta& d) {
  std::vector<engine::Event> events;
  s.h->drain(events);
  for (auto& e : events) {
    if (s.done) break;
    if (e.kind == engine::Event::Kind::kToken)
      on_token(s, e, d);
    else
      on_finish(s, e, d);
  }
}

void Generation::on_token(Sample& s, const engine::Event& e, ChoiceDelta& d) {
  if (s.stopped || s.resubmit) return;  // tokens the engine made before our cancel landed
  if (!any_token_) {
    any_token_ = true;
    t_first_ = std::chrono::steady_clock::now();
  }
  s.generated.push_back(e.token);
  ++totals_.completion_tokens;
  if (prep_.sampling.top_logprobs >= 0) {
    TokenLogprob lp{ctx_.tok->token_bytes(e.token), e.logprob, {}};
    for (auto& t : e.top) lp.top.emplace_back(ctx_.tok->token_bytes(t.token), t.logprob);
    d.logprobs.push_back(std::move(lp));
  }
  // Only tokens inside an opened <think> block count against the budget.
  const bool thinking_now = prep_.split_reasoning && s.reason.in_think_block();
  feed(s, s.dec->push(e.token), d);
  if (s.stopped) {
    ctx_.gen->cancel(s.h->id());
    return;
  }
  if (thinking_now) ++totals_.reasoning_tokens;
  if (prep_.thinking_budget >= 0 && thinking_now && !s.reason.closed() && !s.budget_forced &&
      ++s.think_tokens >= prep_.thinking_budget) {
    // Budget spent: stop this request, then continue from the same tokens plus </think>.
    s.budget_forced = true;
    s.resubmit = true;
    ctx_.gen->cancel(s.h->id());
  }
}

void Generation::on_finish(Sample& s, const engine::Event& e, ChoiceDelta& d) {
  if (s.index == 0 && totals_.cached_tokens == 0) totals_.cached_tokens = e.usage.cached_tokens;
  if (s.index == 0 && totals_.engine_queue_ms < 0) totals_.engine_queue_ms = e.usage.queue_ms;
  if (s.resubmit && e.reason != engine::FinishReason::kError) {
    s.resubmit = false;
    feed(s, s.dec->flush(), d);
    feed(s, kForcedClose, d);
    int left = s.max_tokens - int(s.generated.size()) - int(close_think_ids_.size());
    if (left > 0 && !s.stopped) {
      std::vector<engine::TokenId> p = s.prompt;
      p.insert(p.end(), s.generated.begin(), s.generated.end());
      p.insert(p.end(), close_think_ids_.begin(), close_think_ids_.end());
      s.generated.insert(s.generated.end(), close_think_ids_.begin(), close_think_ids_.end());
      totals_.completion_tokens += int(close_think_ids_.size());
      submit(s, std::move(p), left);
      return;
    }
    close_text(s, d);
    s.done = true;
    d.finish = s.stopped ? "stop" : "length";
    return;
  }
  if (e.reason == engine::FinishReason::kError) {
    error_ = e.error.empty() ? "the engine failed on this request" : e.error;
    s.done = true;
    s.h->set_notifier(nullptr);
    d.finish = "error";
    return;
  }
  if (!s.stopped) close_text(s, d);
  s.done = true;
  s.h->set_notifier(nullptr);
  if (s.stopped)
    d.finish = "stop";
  else if (e.reason == engine::FinishReason::kLength)
    d.finish = "length";
  else
    d.finish = "stop";
  if (std::string_view(d.finish) == "stop" && s.tools.num_calls() > 0) d.finish = "tool_calls";
}

void Generation::feed(Sample& s, std::string_view text, ChoiceDelta& d) {
  if (text.empty() || s.stopped) return;
  auto o = s.stop.push(text);
  route(s, o.text, d);
  if (o.stopped) {
    s.stopped = true;
    close_text(s, d);
  }
}

namespace {
void add_piece(ChoiceDelta& d, OutPiece::Kind k, std::string_view text) {
  const bool merges = k == OutPiece::Kind::kReasoning || k == OutPiece::Kind::kText ||
                      k == OutPiece::Kind::kCallArgs;
  if (merges && text.empty()) return;
  if (merges && !d.pieces.empty() && d.pieces.back().kind == k)
    d.pieces.back().text.append(text);
  else
    d.pieces.push_back({k, std::string(text)});
}

void add_split(ChoiceDelta& d, const SplitText& sp) {
  d.reasoning += sp.reasoning;
  add_piece(d, OutPiece::Kind::kReasoning, sp.reasoning);
}

OutPiece::Kind kind_of(ToolPiece::Kind k) {
  switch (k) {
    case ToolPiece::Kind::kText:
      return OutPiece::Kind::kText;
    case ToolPiece::Kind::kCallBegin:
      return OutPiece::Kind::kCallBegin;
    case ToolPiece::Kind::kCallArgs:
      return OutPiece::Kind::kCallArgs;
    case ToolPiece::Kind::kCallEnd:
      return OutPiece::Kind::kCallEnd;
  }
  return OutPiece::Kind::kText;
}

void add_tools(ChoiceDelta& d, ToolDelta td) {
  d.content += td.content;
  for (auto& c : td.calls) d.calls.push_back(std::move(c));
  for (auto& p : td.pieces) add_piece(d, kind_of(p.kind), p.text);
}
}  // namespace

void Generation::route(Sample& s, std::string_view text, ChoiceDelta& d) {
  SplitText sp;
  if (prep_.split_reasoning)
    sp = s.reason.push(text);
  else
    sp.content = text;
  add_split(d, sp);
  if (!prep_.parse_tools) {
    d.content += sp.content;
    add_piece(d, OutPiece::Kind::kText, sp.content);
    return;
  }
  add_tools(d, s.tools.push(sp.content));
}

// End of a choice's text: release everything the filters held back.
void Generation::close_text(Sample& s, ChoiceDelta& d) {
  if (!s.stopped) {
    auto tail = s.dec->flush();
    if (!tail.empty()) {
      auto o = s.stop.push(tail);
      route(s, o.text, d);
      if (o.stopped) s.stopped = true;
    }
    if (!s.stopped) route(s, s.stop.finish(), d);
  }
  SplitText sp;
  if (prep_.split_reasoning) sp = s.reason.finish();
  add_split(d, sp);
  if (!prep_.parse_tools) {
    d.content += sp.content;
    add_piece(d, OutPiece::Kind::kText, sp.content);
    return;
  }
  add_tools(d, s.tools.push(sp.content));
  add_tools(d, s.tools.finish());
}

}  // namespace tandem::server
