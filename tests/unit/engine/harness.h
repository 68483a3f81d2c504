#pragma once
// Drives an EngineCore over a MockRunner step by step, and reads handles back.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "mock_runner.h"

namespace tandem::engine::testing {

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;  // per sample
  std::vector<Event> finish;                 // per sample (kind kFinish), or kind kToken if none
  int finishes = 0;
};

inline Outcome collect(RequestHandle& h, int n) {
  Outcome o;
  o.tokens.resize(size_t(n));
  o.finish.resize(size_t(n));
  std::vector<Event> evs;
  h.drain(evs);
  for (auto& e : evs) {
    EXPECT_GE(e.sample, 0);
    EXPECT_LT(e.sample, n);
    if (e.kind == Event::Kind::kToken) {
      EXPECT_EQ(o.finish[size_t(e.sample)].kind, Event::Kind::kToken) << "token after finish";
      o.tokens[size_t(e.sample)].push_back(e.token);
    } else {
      EXPECT_EQ(o.finish[size_t(e.sample)].kind, Event::Kind::kToken) << "two finishes";
      o.finish[size_t(e.sample)] = e;
      ++o.finishes;
    }
  }
  return o;
}

// A prompt whose first token names it in MockRunner::history ("<first>@<pos>+<n>").
inline std::vector<TokenId> make_prompt(int first, int len, uint32_t seed, int vocab) {
  std::mt19937 g(seed);
  std::vector<TokenId> p(static_cast<size_t>(len));
  p[0] = first;
  for (int i = 1; i < len; ++i) p[size_t(i)] = TokenId(g() % uint32_t(vocab));
  return p;
}

inline Request greedy_request(std::vector<TokenId> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

inline EngineOptions test_options(int max_seqs, int max_tokens) {
  EngineOptions o;
  o.max_num_seqs = max_seqs;
  o.max_num_batched_tokens = max_tokens;
  o.kv_watermark = 0.0;
  return o;
}

struct Harness {
  MockRunner runner;
  EngineCore core;
  RequestId next_id = 1;

  Harness(int vocab, int block_size, int num_blocks, const EngineOptions& opt, int runner_knee = 0)
      : runner(vocab, block_size, num_blocks, 4096, runner_knee), core(runner, opt) {}

  std::shared_ptr<RequestHandle> submit(Request r) {
    core.validate(r);
    auto h = std::make_shared<RequestHandle>(next_id);
    core.add(next_id++, std::move(r), h);
    return h;
  }
  std::vector<std::string> step() {
    const size_t before = runner.history.size();
    core.step();
    return runner.history.size() > before ? runner.history.back() : std::vector<std::string>{};
  }
  int run(int max_steps = 100000) {
    int n = 0;
    while (core.has_work() && n < max_steps) {
      core.step();
      ++n;
    }
    return n;
  }
};

}  // namespace tandem::engine::testing
