// The step loop: prefix caching seen from a request, stop conditions, validation,
// runner failures, and a random stress run against the mock's reference.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "harness.h"

namespace tandem::engine::testing {
namespace {

constexpr int kVocab = 700;

TEST(EngineCore, PrefixCacheHitSkipsCachedBlocks) {
  for (bool caching : {true, false}) {
    EngineOptions opt = test_options(8, 256);
    opt.enable_prefix_caching = caching;
    Harness h(kVocab, 16, 64, opt);
    auto system = make_prompt(7, 50, 21, kVocab);
    Request a = greedy_request(system, 2);
    auto ha = h.submit(a);
    h.run();
    auto p = system;
    p.resize(48);
    auto q = make_prompt(8, 11, 22, kVocab);
    p.insert(p.end(), q.begin(), q.end());
    Request b = greedy_request(p, 3);
    auto hb = h.submit(b);
    EXPECT_EQ(h.step(), std::vector<std::string>{caching ? "7@48+11" : "7@0+59"});
    h.run();
    Outcome o = collect(*hb, 1);
    EXPECT_EQ(o.tokens[0], reference_tokens(b.prompt, 3, kVocab));
    EXPECT_EQ(o.finish[0].usage.cached_tokens, caching ? 48 : 0);
    EXPECT_GE(o.finish[0].usage.queue_ms, 0.0);  // it was scheduled: its wait is known
    EXPECT_EQ(o.finish[0].usage.prompt_tokens, 59);
    auto st = h.core.stats();
    EXPECT_EQ(st.prefix_cache_queries, 50u + 59u);
    EXPECT_EQ(st.prefix_cache_hits, caching ? 48u : 0u);
    EXPECT_EQ(st.prompt_tokens, 50u + 59u);
    EXPECT_EQ(st.generation_tokens, 5u);
  }
}

TEST(EngineCore, StopsOnEosAndStopIdsButNotWhenIgnored) {
  auto prompt = make_prompt(3, 30, 23, kVocab);
  const auto ref = reference_tokens(prompt, 10, kVocab);
  EngineOptions opt = test_options(8, 256);
  opt.eos_ids = {ref[3]};
  Harness h(kVocab, 16, 64, opt);
  Request eos = greedy_request(prompt, 10);
  Request ignored = eos;
  ignored.ignore_eos = true;
  Request stop = greedy_request(prompt, 10);
  stop.stop_token_ids = {ref[5]};
  stop.ignore_eos = true;
  auto he = h.submit(eos), hi = h.submit(ignored), hs = h.submit(stop);
  h.run();
  Outcome oe = collect(*he, 1), oi = collect(*hi, 1), os = collect(*hs, 1);
  // The stop token counts as generated but is not sent.
  EXPECT_EQ(oe.tokens[0], std::vector<TokenId>(ref.begin(), ref.begin() + 3));
  EXPECT_EQ(oe.finish[0].reason, FinishReason::kStop);
  EXPECT_EQ(oe.finish[0].usage.completion_tokens, 4);
  EXPECT_EQ(oi.tokens[0], ref);
  EXPECT_EQ(oi.finish[0].reason, FinishReason::kLength);
  EXPECT_EQ(os.tokens[0], std::vector<TokenId>(ref.begin(), ref.begin() + 5));
  EXPECT_EQ(os.finish[0].reason, FinishReason::kStop);
  EXPECT_TRUE(he->finished() && hi->finished() && hs->finished());
}

// Seeded random sampling: each sequence has its own generator, so a request draws the same
// tokens alone or in a batch (sampled in parallel), and n samples of one seed differ.
TEST(EngineCore, SeededSamplingIsBatchInvariant) {
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) {
    Request r = greedy_request(make_prompt(i, 5 + 7 * i, uint32_t(40 + i), kVocab), 12);
    r.sampling.temperature = 3.0f;  // flat enough that draws leave the mock's argmax
    r.sampling.seed = 1000 + uint64_t(i);
    r.n = i % 3 == 0 ? 2 : 1;
    reqs.push_back(r);
  }
  auto run = [&](bool together, int threads) {
    EngineOptions opt = test_options(32, 128);
    opt.sample_threads = threads;
    Harness h(kVocab, 16, 256, opt);
    std::vector<Outcome> out;
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (auto& r : reqs) {
      hs.push_back(h.submit(r));
      if (!together) h.run();
    }
    h.run();
    for (size_t i = 0; i < reqs.size(); ++i) out.push_back(collect(*hs[i], reqs[i].n));
    return out;
  };
  const auto alone = run(false, 1), together = run(true, 4);
  int off_argmax = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (int s = 0; s < reqs[i].n; ++s) {
      EXPECT_EQ(together[i].tokens[size_t(s)], alone[i].tokens[size_t(s)]) << i << " " << s;
      EXPECT_EQ(alone[i].tokens[size_t(s)].size(), 12u);
    }
    if (reqs[i].n == 2) {
      EXPECT_NE(alone[i].tokens[0], alone[i].tokens[1]);
    }
    if (alone[i].tokens[0] != reference_tokens(reqs[i].prompt, 12, kVocab)) ++off_argmax;
  }
  EXPECT_GT(off_argmax, 0);  // the draws are really random
}

TEST(EngineCore, GreedyStepsLetTheRunnerDoTheArgmax) {
  Harness h(kVocab, 16, 64, test_options(8, 256));
  h.runner.greedy = true;
  Request a = greedy_request(make_prompt(1, 30, 31, kVocab), 6);
  Request b = greedy_request(make_prompt(2, 21, 32, kVocab), 4);
  auto ha = h.submit(a), hb = h.submit(b);
  h.run();
  EXPECT_EQ(h.runner.greedy_forwards, h.runner.forwards);  // no logits ever came back
  EXPECT_EQ(collect(*ha, 1).tokens[0], reference_tokens(a.prompt, 6, kVocab));
  EXPECT_EQ(collect(*hb, 1).tokens[0], reference_tokens(b.prompt, 4, kVocab));

  // A prompt about to fork needs its row; a logprob request needs the whole row.
  Request forked = greedy_request(make_prompt(3, 18, 33, kVocab), 3);
  forked.n = 2;
  Request logprobs = greedy_request(make_prompt(4, 9, 34, kVocab), 3);
  logprobs.sampling.top_logprobs = 2;
  auto hf = h.submit(forked), hl = h.submit(logprobs);
  const int before = h.runner.forwards, before_greedy = h.runner.greedy_forwards;
  h.run();
  EXPECT_EQ(h.runner.greedy_forwards, before_greedy);  // the logprob request was in every step
  EXPECT_EQ(h.runner.forwards - before, 3);
  Outcome of = collect(*hf, 2), ol = collect(*hl, 1);
  EXPECT_EQ(of.tokens[0], reference_tokens(forked.prompt, 3, kVocab));
  EXPECT_EQ(of.tokens[1], reference_tokens(forked.prompt, 3, kVocab));
  EXPECT_EQ(ol.tokens[0], reference_tokens(logprobs.prompt, 3, kVocab));
}

TEST(EngineCore, RefusesRequestsItCanNeverRun) {
  Harness h(kVocab, 16, 8, test_options(8, 256));  // 8 blocks: 128 tokens at most
  EXPECT_EQ(h.core.max_model_len(), 128);
  auto bad = [&](Request r) {
    try {
      h.core.validate(r);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return true;
    }
    return false;
  };
  auto ok = greedy_request(make_prompt(1, 100, 24, kVocab), 28);
  EXPECT_FALSE(bad(ok));
  auto r = ok;
  r.max_tokens = 29;  // 129 > 128
  EXPECT_TRUE(bad(r));
  r = ok;
  r.prompt.clear();
  EXPECT_TRUE(bad(r));
  r = ok;
  r.prompt[5] = kVocab;
  EXPECT_TRUE(bad(r));
  r = ok;
  r.prompt[5] = -1;
  EXPECT_TRUE(bad(r));
  r = ok;
  r.n = 0;
  EXPECT_TRUE(bad(r));
  r = ok;
  r.max_tokens = 0;
  EXPECT_TRUE(bad(r));
  r = ok;
  r.sampling.temperature = -1.0f;
  EXPECT_TRUE(bad(r));
  r = ok;
  r.stop_token_ids = {kVocab + 3};
  EXPECT_TRUE(bad(r));
}

TEST(EngineCore, RejectsImpossibleOptions) {
  MockRunner runner(kVocab, 16, 8);
  EngineOptions o = test_options(64, 32);  // fewer batched tokens than sequences
  EXPECT_THROW(EngineCore(runner, o), Error);
  o = test_options(8, 8);  // a budget below one block
  EXPECT_THROW(EngineCore(runner, o), Error);
  o = test_options(8, 64);
  o.eos_ids = {kVocab};
  EXPECT_THROW(EngineCore(runner, o), Error);
}

TEST(EngineCore, RunnerFailureEndsRequestsWithErrorAndFreesBlocks) {
  Harness h(kVocab, 16, 64, test_options(8, 256));
  auto ha = h.submit(greedy_request(make_prompt(1, 20, 25, kVocab), 10));
  auto hb = h.submit(greedy_request(make_prompt(2, 20, 26, kVocab), 10));
  h.step();
  h.runner.before_forward = [] { tandem::fail(ErrorKind::kInternal, "device lost"); };
  EXPECT_THROW(h.core.step(), Error);
  h.core.fail_step("device lost");
  for (auto* hd : {ha.get(), hb.get()}) {
    Outcome o = collect(*hd, 1);
    ASSERT_EQ(o.finishes, 1);
    EXPECT_EQ(o.finish[0].reason, FinishReason::kError);
    EXPECT_EQ(o.finish[0].error, "device lost");
    EXPECT_EQ(o.tokens[0].size(), 1u);
  }
  EXPECT_FALSE(h.core.has_work());
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
}

// A failed step ends only the requests it carried (every sample of them, forked or not);
// the request waiting for a seat runs on to exactly its own tokens, and nothing leaks.
TEST(EngineCore, RunnerFailureEndsOnlyTheRequestsOfThatStep) {
  for (int fail_at : {0, 1}) {  // the prefill step, or the first decode step
    Harness h(kVocab, 16, 64, test_options(2, 256));
    Request a = greedy_request(make_prompt(1, 20, 25, kVocab), 10);
    Request b = greedy_request(make_prompt(2, 20, 26, kVocab), 10);
    b.n = 2;
    Request c = greedy_request(make_prompt(3, 30, 27, kVocab), 8);
    auto ha = h.submit(a), hb = h.submit(b), hc = h.submit(c);
    for (int i = 0; i < fail_at; ++i) h.step();  // a and b hold both seats; c waits
    int calls = 0;
    h.runner.before_forward = [&] {
      if (calls++ == 0) tandem::fail(ErrorKind::kInternal, "transient");
    };
    EXPECT_THROW(h.core.step(), Error);
    h.core.fail_step("transient");
    h.core.block_manager().check_invariants();
    h.run();
    Outcome oa = collect(*ha, 1), ob = collect(*hb, 2), oc = collect(*hc, 1);
    ASSERT_EQ(oa.finishes, 1);
    EXPECT_EQ(oa.finish[0].reason, FinishReason::kError) << "fail_at " << fail_at;
    EXPECT_EQ(oa.finish[0].error, "transient");
    EXPECT_EQ(oa.tokens[0].size(), size_t(fail_at));
    ASSERT_EQ(ob.finishes, 2) << "fail_at " << fail_at;
    for (int i = 0; i < 2; ++i) EXPECT_EQ(ob.finish[size_t(i)].reason, FinishReason::kError);
    ASSERT_EQ(oc.finishes, 1);
    EXPECT_EQ(oc.finish[0].reason, FinishReason::kLength) << "fail_at " << fail_at;
    EXPECT_EQ(oc.tokens[0], reference_tokens(c.prompt, 8, kVocab));
    EXPECT_FALSE(h.core.has_work());
    EXPECT_EQ(h.core.block_manager().num_used(), 0);
    h.core.block_manager().check_invariants();
  }
}

// Random arrivals, lengths, priorities, samples and cancels on a cache small enough to
// force preemptions: every finished sample equals its prompt's output alone, and nothing
// leaks.
TEST(EngineCore, RandomLoadMatchesReferenceAndFreesEverything) {
  for (int seed = 0; seed < 6; ++seed) {
    std::mt19937 g{uint32_t(seed)};
    const int bs = seed % 2 ? 16 : 32;
    EngineOptions opt = test_options(6 + seed, 96 + 32 * seed);
    opt.bulk_prompt_threshold = 60;
    opt.bulk_aging_steps = 20;
    Harness h(kVocab, bs, 12 + seed, opt);
    const int max_len = h.core.max_model_len();
    struct Live {
      Request r;
      std::shared_ptr<RequestHandle> h;
      bool cancelled = false;
    };
    std::vector<Live> reqs;
    auto shared = make_prompt(1, 40, uint32_t(seed), kVocab);
    int steps = 0;
    while (reqs.size() < 40 || h.core.has_work()) {
      if (reqs.size() < 40 && g() % 3 == 0) {
        const int len = 1 + int(g() % uint32_t(max_len / 2));
        std::vector<TokenId> p = make_prompt(int(g() % kVocab), len, g(), kVocab);
        if (g() % 2) {  // a common prefix, for the cache
          p.insert(p.begin(), shared.begin(), shared.begin() + std::min(40, max_len / 3));
          p.resize(size_t(std::min(int(p.size()), max_len / 2)));
        }
        Request r = greedy_request(p, 1 + int(g() % uint32_t(max_len - int(p.size()))));
        r.max_tokens = std::min(r.max_tokens, 40);
        r.n = g() % 4 == 0 ? 2 : 1;
        r.priority = Priority(g() % 3);
        reqs.push_back({r, h.submit(r)});
      }
      if (!reqs.empty() && g() % 25 == 0) {
        Live& l = reqs[g() % reqs.size()];
        if (!l.h->finished()) {
          h.core.cancel(l.h->id());
          l.cancelled = true;
        }
      }
      h.core.step();
      ASSERT_NO_THROW(h.core.block_manager().check_invariants());
      ASSERT_LT(++steps, 20000) << "no progress";
    }
    for (auto& l : reqs) {
      ASSERT_TRUE(l.h->finished());
      Outcome o = collect(*l.h, l.r.n);
      const auto ref = reference_tokens(l.r.prompt, l.r.max_tokens, kVocab);
      for (int s = 0; s < l.r.n; ++s) {
        const auto& got = o.tokens[size_t(s)];
        ASSERT_LE(got.size(), ref.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), ref.begin())) << "seed " << seed;
        if (!l.cancelled) {
          EXPECT_EQ(got, ref) << "seed " << seed;
        }
        EXPECT_EQ(o.finish[size_t(s)].usage.completion_tokens, int(got.size()));
      }
    }
    EXPECT_EQ(h.core.block_manager().num_used(), 0);
    if (seed == 0) {
      EXPECT_GT(h.core.stats().preemptions, 0u);
    }
  }
}

}  // namespace
}  // namespace tandem::engine::testing
