// The threaded Engine: many submitters, cancel from another thread, shutdown.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "harness.h"

namespace tandem::engine::testing {
namespace {

constexpr int kVocab = 900;

TEST(Engine, ManySubmittersGetTheirOwnTokens) {
  Engine engine(std::make_unique<MockRunner>(kVocab, 16, 256), test_options(32, 512));
  constexpr int kThreads = 8, kPerThread = 8;
  std::vector<std::thread> ts;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::vector<std::pair<Request, std::shared_ptr<RequestHandle>>> mine;
      for (int i = 0; i < kPerThread; ++i) {
        Request r = greedy_request(make_prompt(t, 5 + 13 * i + t, uint32_t(100 * t + i), kVocab),
                                   3 + (i * 7 + t) % 20);
        mine.emplace_back(r, engine.submit(r));
      }
      for (auto& [r, h] : mine) {
        std::vector<TokenId> got;
        Event e;
        while (h->next(e, std::chrono::seconds(30))) {
          if (e.kind == Event::Kind::kFinish) break;
          got.push_back(e.token);
        }
        if (e.kind != Event::Kind::kFinish || e.reason != FinishReason::kLength ||
            got != reference_tokens(r.prompt, r.max_tokens, kVocab))
          ++mismatches;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(engine.stats().generation_tokens > 0, true);
}

TEST(Engine, SubmitRejectsBadRequestsOnTheCallersThread) {
  Engine engine(std::make_unique<MockRunner>(kVocab, 16, 16), test_options(8, 64));
  EXPECT_EQ(engine.max_model_len(), 256);
  EXPECT_EQ(engine.vocab_size(), kVocab);
  EXPECT_THROW(engine.submit(greedy_request({}, 4)), Error);
  EXPECT_THROW(engine.submit(greedy_request(make_prompt(1, 250, 1, kVocab), 10)), Error);
}

TEST(Engine, CancelFromAnotherThreadAndNotifier) {
  std::atomic<int> notified{0};
  auto runner = std::make_unique<MockRunner>(kVocab, 16, 64);
  // From its third step the engine waits until the cancel was sent, so the request cannot
  // finish by length first however loaded this machine is.
  auto cancel_sent = std::make_shared<std::atomic<bool>>(false);
  auto steps = std::make_shared<std::atomic<int>>(0);
  runner->before_forward = [cancel_sent, steps] {
    if (steps->fetch_add(1) < 2) return;
    for (int i = 0; i < 30000 && !cancel_sent->load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  Engine engine(std::move(runner), test_options(8, 64));
  Request r = greedy_request(make_prompt(1, 30, 2, kVocab), 400);
  auto h = engine.submit(r);
  h->set_notifier([&] { ++notified; });
  Event e;
  ASSERT_TRUE(h->next(e, std::chrono::seconds(30)));  // the engine is producing
  std::thread([&] {
    engine.cancel(h->id());
    cancel_sent->store(true);
  }).join();
  int tokens = 1;
  while (h->next(e, std::chrono::seconds(30)) && e.kind == Event::Kind::kToken) ++tokens;
  ASSERT_EQ(e.kind, Event::Kind::kFinish);
  EXPECT_EQ(e.reason, FinishReason::kCancelled);
  EXPECT_EQ(e.usage.completion_tokens, tokens);
  EXPECT_TRUE(h->finished());
  EXPECT_GT(notified.load(), 0);
  for (int i = 0; i < 1000 && engine.stats().kv_usage > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine.stats().kv_usage, 0.0);
}

// Requests submitted while a step runs are counted as waiting right away, not only once
// the engine thread has taken them in after that step.
TEST(Engine, StatsCountRequestsNotYetTakenIn) {
  auto runner = std::make_unique<MockRunner>(kVocab, 16, 64);
  auto in_step = std::make_shared<std::atomic<bool>>(false);
  auto release = std::make_shared<std::atomic<bool>>(false);
  runner->before_forward = [in_step, release] {
    in_step->store(true);
    while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  Engine engine(std::move(runner), test_options(8, 64));
  auto first = engine.submit(greedy_request(make_prompt(1, 10, 1, kVocab), 2));
  while (!in_step->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<std::shared_ptr<RequestHandle>> more;
  for (int i = 0; i < 3; ++i)
    more.push_back(engine.submit(greedy_request(make_prompt(2 + i, 10, 2 + i, kVocab), 2)));
  // All four are visible: the three in the inbox as waiting, the first as waiting or
  // running (the snapshot is taken as the step starts, before it is scheduled).
  const EngineStats st = engine.stats();
  EXPECT_GE(st.waiting, 3);
  EXPECT_EQ(st.waiting + st.running, 4);
  release->store(true);
  for (auto& h : more) {
    Event e;
    while (h->next(e, std::chrono::seconds(30)) && e.kind != Event::Kind::kFinish) {
    }
    EXPECT_EQ(e.kind, Event::Kind::kFinish);
  }
  EXPECT_EQ(engine.stats().waiting, 0);
}

// A step that throws ends the requests it carried with the error; the engine thread lives
// on and serves the next request exactly.
TEST(Engine, KeepsServingAfterAFailedStep) {
  auto runner = std::make_unique<MockRunner>(kVocab, 16, 64);
  auto calls = std::make_shared<std::atomic<int>>(0);
  runner->before_forward = [calls] {
    if (calls->fetch_add(1) == 0) tandem::fail(ErrorKind::kInternal, "injected");
  };
  Engine engine(std::move(runner), test_options(8, 64));
  auto first = engine.submit(greedy_request(make_prompt(1, 30, 5, kVocab), 6));
  Event e;
  while (first->next(e, std::chrono::seconds(30)) && e.kind != Event::Kind::kFinish) {
  }
  ASSERT_EQ(e.kind, Event::Kind::kFinish);
  EXPECT_EQ(e.reason, FinishReason::kError);
  EXPECT_NE(e.error.find("injected"), std::string::npos);
  EngineStats st = engine.stats();
  EXPECT_EQ(st.failed_steps, 1u);
  EXPECT_EQ(st.failing_steps, 1);
  EXPECT_NE(st.last_error.find("injected"), std::string::npos);
  Request r = greedy_request(make_prompt(2, 40, 6, kVocab), 7);
  auto second = engine.submit(r);
  std::vector<TokenId> got;
  while (second->next(e, std::chrono::seconds(30)) && e.kind != Event::Kind::kFinish)
    got.push_back(e.token);
  ASSERT_EQ(e.kind, Event::Kind::kFinish);
  EXPECT_EQ(e.reason, FinishReason::kLength);
  EXPECT_EQ(got, reference_tokens(r.prompt, 7, kVocab));
  // The streak ends when the step that finished `second` returns, just after its events.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (engine.stats().failing_steps != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  st = engine.stats();
  EXPECT_EQ(st.failing_steps, 0);
  EXPECT_EQ(st.failed_steps, 1u);
}

TEST(Engine, ShutdownCancelsUnfinishedRequests) {
  std::shared_ptr<RequestHandle> h;
  {
    Engine engine(std::make_unique<MockRunner>(kVocab, 16, 64), test_options(8, 64));
    Request r = greedy_request(make_prompt(1, 30, 3, kVocab), 220);
    r.n = 2;
    h = engine.submit(r);
  }
  std::vector<Event> evs;
  h->drain(evs);
  int finishes = 0;
  for (auto& e : evs)
    if (e.kind == Event::Kind::kFinish) {
      ++finishes;
      EXPECT_TRUE(e.reason == FinishReason::kCancelled || e.reason == FinishReason::kLength);
    }
  EXPECT_EQ(finishes, 2);
  EXPECT_TRUE(h->finished());
}

}  // namespace
}  // namespace tandem::engine::testing
