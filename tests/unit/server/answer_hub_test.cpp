// The answer hub: answers that run with nobody watching, re-attaching from any event with
// nothing lost or repeated, stop, the bounds (answers at once, bytes per answer, how long a
// finished one is kept), checkpoints, and what a server shutdown stores.
#include <gtest/gtest.h>

#include "server/answer_hub.h"
#include "server/api_error.h"
#include "web_test_util.h"

namespace tandem::server {
namespace {

using namespace testing;

std::shared_ptr<const tok::Tokenizer> tokenizer() {
  static auto t = tok::load_tokenizer("");
  return t;
}

const std::string kText =
    "Sure. Here is a list:\n\n- one\n- two\n\n```python\nprint('hi')\n```\nDone, ünïcode ✓.";

struct Fixture {
  TempDir dir;
  LockedFake gen;
  ServerContext ctx;
  store::ConversationStore store;
  std::string cid;
  std::unique_ptr<AnswerHub> hub;

  explicit Fixture(AnswerHubOptions opt = {}, std::string text = kText)
      : gen([text](const engine::Request&) { return tokenizer()->encode(text, true); }),
        ctx(test_context(gen, tokenizer())),
        store(dir.path / "c.db") {
    ctx.opt.thinking = ThinkingDefault::kOff;
    cid = store.create("", "t").id;
    hub = std::make_unique<AnswerHub>(ctx, store, opt);
  }

  std::shared_ptr<AnswerRun> start(const std::string& owner = "") {
    if (owner != "" && !store.get(owner, cid)) cid = store.create(owner, "t").id;
    auto u = store.add_message(owner, cid, msg("user", "hello"));
    auto a = msg("assistant", "", u.id);
    a.status = "streaming";
    a = store.add_message(owner, cid, a);
    json body = {{"model", "tiny"},
                 {"messages", json::array({{{"role", "user"}, {"content", "hello"}}})},
                 {"stream", true}};
    return hub->start(owner, cid, a, hub->prepare(parse_openai_chat(body)));
  }

  static store::MessageRecord msg(std::string role, std::string content, std::string parent = {}) {
    store::MessageRecord m;
    m.role = std::move(role);
    m.content = std::move(content);
    m.parent_id = std::move(parent);
    return m;
  }
};

// The content of the delta events in `sse`, and the number of the last one.
std::string content_of(const std::string& sse, uint64_t* last_id = nullptr, bool* done = nullptr) {
  std::string out;
  for (auto& e : parse_sse(sse)) {
    if (e.event == "delta") {
      out += json::parse(e.data).value("c", "");
      if (last_id) *last_id = std::stoull(e.id);
    }
    if (e.event == "done" && done) *done = true;
  }
  return out;
}

TEST(AnswerHub, RunsWithNobodyWatchingAndStoresTheAnswer) {
  Fixture f;
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->finished(); }));
  EXPECT_EQ(run->status(), "done");
  auto stored = f.store.message("", f.cid, run->id());
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->content, kText);
  EXPECT_EQ(stored->status, "done");
  EXPECT_EQ(stored->meta["output_tokens"], int(tokenizer()->encode(kText, true).size()));
  EXPECT_TRUE(stored->meta.contains("ttft_ms"));
  EXPECT_EQ(stored->meta["finish_reason"], "stop");
  // A late reader gets every event, then done.
  uint64_t from = 0;
  std::string sse;
  EXPECT_TRUE(run->read(from, sse));
  bool done = false;
  EXPECT_EQ(content_of(sse, nullptr, &done), kText);
  EXPECT_TRUE(done);
  EXPECT_EQ(from, run->events());
}

TEST(AnswerHub, ReattachingFromAnyEventLosesAndRepeatsNothing) {
  Fixture f;
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->finished(); }));
  const uint64_t n = run->events();
  ASSERT_GT(n, 10u);
  for (uint64_t cut = 0; cut <= n; ++cut) {
    uint64_t a = 0, b = cut;
    std::string first, second;
    // The first connection saw `cut` events, the second starts there.
    run->read(a, first);
    auto events = parse_sse(first);
    std::string head;
    for (uint64_t i = 0; i < cut; ++i) head += json::parse(events[i].data).value("c", "");
    run->read(b, second);
    uint64_t last = 0;
    std::string tail = content_of(second, &last);
    EXPECT_EQ(head + tail, kText) << "cut at " << cut;
    if (cut < n) {
      EXPECT_EQ(parse_sse(second)[0].id, std::to_string(cut + 1));
    }
  }
}

TEST(AnswerHub, ALiveReaderIsWokenAndSeesEventsInOrder) {
  Fixture f;
  auto run = f.start();
  std::atomic<int> wakes{0};
  int token = run->subscribe([&] { ++wakes; });
  uint64_t from = 0;
  std::string got;
  bool done = false;
  for (int i = 0; i < 5000 && !done; ++i) {
    f.gen.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::string sse;
    done = run->read(from, sse);
    got += sse;
  }
  run->unsubscribe(token);
  EXPECT_TRUE(done);
  EXPECT_EQ(content_of(got), kText);
  EXPECT_GT(wakes.load(), 1);
  uint64_t prev = 0;
  for (auto& e : parse_sse(got))
    if (e.event == "delta") {
      EXPECT_EQ(std::stoull(e.id), prev + 1);
      prev = std::stoull(e.id);
    }
}

TEST(AnswerHub, StopEndsTheEngineRequestAndStoresWhatWasWritten) {
  Fixture f({}, std::string(4000, 'a'));
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->events() >= 3; }));
  EXPECT_TRUE(f.hub->stop(run));
  ASSERT_TRUE(step_until(f.gen, [&] { return run->finished(); }));
  EXPECT_EQ(run->status(), "stopped");
  EXPECT_GE(f.gen.cancels(), 1);
  // The engine ends the request at its next step: nothing left running.
  f.gen.step();
  EXPECT_EQ(f.gen.stats().running, 0);
  auto stored = f.store.message("", f.cid, run->id());
  EXPECT_EQ(stored->status, "stopped");
  EXPECT_FALSE(stored->content.empty());
  EXPECT_EQ(stored->content, run->message()["content"]);
  EXPECT_FALSE(f.hub->stop(run));  // already over
}

TEST(AnswerHub, AtMostMaxRunningAnswersAtOnce) {
  AnswerHubOptions o;
  o.max_running = 2;
  Fixture f(o, std::string(3000, 'b'));
  auto a = f.start();
  auto b = f.start();
  try {
    f.start();
    FAIL() << "a third answer started";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 429);
  }
  f.hub->stop(a);
  ASSERT_TRUE(step_until(f.gen, [&] { return a->finished(); }));
  EXPECT_NO_THROW(f.start());  // room again
  EXPECT_EQ(f.hub->running(), 2u);
}

TEST(AnswerHub, AnAnswerPastTheByteBoundEndsAsAnError) {
  AnswerHubOptions o;
  o.max_bytes = 100;
  Fixture f(o, std::string(2000, 'c'));
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->finished(); }));
  EXPECT_EQ(run->status(), "error");
  auto stored = f.store.message("", f.cid, run->id());
  EXPECT_EQ(stored->status, "error");
  EXPECT_NE(stored->meta.value("error", "").find("100 bytes"), std::string::npos);
  EXPECT_LE(stored->content.size(), 200u);
  EXPECT_GE(f.gen.cancels(), 1);
}

TEST(AnswerHub, FinishedAnswersExpireAndOwnersAreKeptApart) {
  AnswerHubOptions o;
  o.keep_finished = std::chrono::milliseconds(50);
  Fixture f(o);
  auto run = f.start("alice");
  EXPECT_FALSE(f.hub->find("bob", run->id()));
  EXPECT_FALSE(f.hub->find("", run->id()));
  EXPECT_EQ(f.hub->find("alice", run->id()), run);
  ASSERT_TRUE(step_until(f.gen, [&] { return run->finished(); }));
  EXPECT_TRUE(step_until(
      f.gen, [&] { return !f.hub->find("alice", run->id()); }, 3000));
  EXPECT_EQ(f.store.message("alice", f.cid, run->id())->content, kText);  // the store has it
}

TEST(AnswerHub, CheckpointsKeepTheTextOfARunningAnswer) {
  AnswerHubOptions o;
  o.checkpoint = std::chrono::milliseconds(0);
  Fixture f(o, std::string(3000, 'd'));
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->events() >= 20; }));
  // Housekeeping runs four times a second: wait for a checkpoint without stepping further.
  std::string stored;
  for (int i = 0; i < 200 && stored.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stored = f.store.message("", f.cid, run->id())->content;
  }
  EXPECT_GE(stored.size(), 20u);
  EXPECT_EQ(f.store.message("", f.cid, run->id())->status, "streaming");
}

TEST(AnswerHub, ShutdownStoresRunningAnswersAsInterrupted) {
  Fixture f({}, std::string(3000, 'e'));
  auto run = f.start();
  ASSERT_TRUE(step_until(f.gen, [&] { return run->events() >= 5; }));
  f.hub.reset();
  auto stored = f.store.message("", f.cid, run->id());
  EXPECT_EQ(stored->status, "interrupted");
  EXPECT_GE(stored->content.size(), 5u);
  EXPECT_GE(f.gen.cancels(), 1);
}

}  // namespace
}  // namespace tandem::server
