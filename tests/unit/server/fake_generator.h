#pragma once
// A scripted stand-in for the engine: each request replays the tokens that `script` returns
// for it, one per step(), then finishes (kStop, or kLength at max_tokens). cancel() ends a
// request at the next step with kCancelled, as the engine does.
#include <functional>
#include <map>
#include <mutex>

#include "core/error.h"
#include "server/context.h"

namespace tandem::server::testing {

// The context the server tests share: `gen` behind the routes, the model served as "tiny".
inline ServerContext test_context(Generator& gen, std::shared_ptr<const tok::Tokenizer> tok) {
  ServerContext ctx;
  ctx.gen = &gen;
  ctx.tok = std::move(tok);
  ctx.model.names = {"tiny"};
  ctx.model.source = "test";
  return ctx;
}

class FakeGenerator : public Generator {
 public:
  using Script = std::function<std::vector<engine::TokenId>(const engine::Request&)>;
  explicit FakeGenerator(Script s, int max_len = 4096) : script_(std::move(s)), max_len_(max_len) {}

  std::shared_ptr<engine::RequestHandle> submit(engine::Request r) override {
    std::lock_guard lock(mu_);
    if (r.prompt.empty()) fail(ErrorKind::kInvalidArgument, "empty prompt");
    auto h = std::make_shared<engine::RequestHandle>(next_id_++);
    Live l{h, r, script_(r), 0, false};
    submitted.push_back(r);
    live_.emplace(h->id(), std::move(l));
    return h;
  }
  void cancel(engine::RequestId id) override {
    std::lock_guard lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) it->second.cancelled = true;
    ++cancels;
  }
  int max_model_len() const override { return max_len_; }
  engine::EngineStats stats() const override {
    std::lock_guard lock(mu_);
    engine::EngineStats st;
    st.waiting = waiting;
    st.running = int(live_.size());
    st.failed_steps = failed_steps;
    st.failing_steps = failing_steps;
    st.last_error = last_error;
    return st;
  }

  // One engine step: a token (or the finish) for every live request. False when idle.
  bool step() {
    std::lock_guard lock(mu_);
    bool any = false;
    for (auto it = live_.begin(); it != live_.end();) {
      Live& l = it->second;
      any = true;
      engine::Event e;
      const bool at_end = l.pos >= l.tokens.size() || l.pos >= size_t(l.req.max_tokens);
      if (fail_after >= 0 && l.pos >= size_t(fail_after)) {
        e.kind = engine::Event::Kind::kFinish;
        e.reason = engine::FinishReason::kError;
        e.error = "device lost";
        l.h->push(e);
        it = live_.erase(it);
        continue;
      }
      if (l.cancelled || at_end) {
        e.kind = engine::Event::Kind::kFinish;
        e.reason = l.cancelled ? engine::FinishReason::kCancelled
                   : l.pos >= size_t(l.req.max_tokens) && l.pos < l.tokens.size()
                       ? engine::FinishReason::kLength
                       : engine::FinishReason::kStop;
        e.usage.prompt_tokens = int(l.req.prompt.size());
        e.usage.completion_tokens = int(l.pos);
        e.usage.cached_tokens = 3;
        l.h->push(e);
        it = live_.erase(it);
        continue;
      }
      e.token = l.tokens[l.pos++];
      e.logprob = -0.5f;
      if (l.req.sampling.top_logprobs > 0) e.top.push_back({e.token, -0.5f});
      l.h->push(e);
      ++it;
    }
    return any;
  }

  std::vector<engine::Request> submitted;
  int cancels = 0;
  int fail_after = -1;
  uint64_t failed_steps = 0;  // reported by stats(), with the two below: drive /health
  int failing_steps = 0;
  std::string last_error;
  int waiting = 0;  // reported by stats(): drives the server's admission check  // >= 0: requests
                    // end with kError after this many tokens

 private:
  struct Live {
    std::shared_ptr<engine::RequestHandle> h;
    engine::Request req;
    std::vector<engine::TokenId> tokens;
    size_t pos;
    bool cancelled;
  };
  mutable std::mutex mu_;  // submit/cancel may come from a background runner's thread
  Script script_;
  int max_len_;
  engine::RequestId next_id_ = 1;
  std::map<engine::RequestId, Live> live_;
};

}  // namespace tandem::server::testing
