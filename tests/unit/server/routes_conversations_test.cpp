// The conversation routes through the Router, over a real store and the answer hub with a
// scripted engine: CRUD, paging, search, export/import, answers streamed and re-attached,
// regenerate and edit as branches, stop, and bad input answered with clear 4xx errors.
#include <gtest/gtest.h>

#include "server/answer_hub.h"
#include "server/byte_stream.h"
#include "server/router.h"
#include "web_test_util.h"

namespace tandem::server {
namespace {

using namespace testing;

std::shared_ptr<const tok::Tokenizer> tokenizer() {
  static auto t = tok::load_tokenizer("");
  return t;
}

const std::string kAnswer = "The answer is **42**.\n\n```c\nint x = 42;\n```\n";

struct Server {
  TempDir dir;
  LockedFake gen;
  ServerContext ctx;
  store::ConversationStore store;
  std::unique_ptr<AnswerHub> hub;
  std::unique_ptr<Router> router;

  explicit Server(std::string answer = kAnswer)
      : gen([answer](const engine::Request&) { return tokenizer()->encode(answer, true); }),
        ctx(test_context(gen, tokenizer())),
        store(dir.path / "c.db") {
    ctx.opt.thinking = ThinkingDefault::kOff;
    hub = std::make_unique<AnswerHub>(ctx, store);
    ctx.conversations = &store;
    ctx.answers = hub.get();
    router = std::make_unique<Router>(ctx);
  }
  HttpResponse call(std::string method, std::string target, const json& body = nullptr) {
    HttpRequest r(std::move(method), std::move(target), body.is_null() ? "" : body.dump());
    return router->handle(r, [] {});
  }
  json ok(std::string method, std::string target, const json& body = nullptr) {
    auto r = call(method, target, body);
    EXPECT_EQ(r.status, 200) << method << " " << target << ": " << r.body;
    return r.body.empty() ? json() : json::parse(r.body);
  }
  // Drains a streamed response to its end (stepping the engine), returning its events.
  std::vector<SseEvent> drain(HttpResponse& r, int max_events = 1 << 30) {
    EXPECT_TRUE(r.source);
    std::string out;
    bool done = false;
    step_until(gen, [&] {
      done = r.source->poll(out);
      return done || int(parse_sse(out).size()) >= max_events;
    });
    r.source->close();
    return parse_sse(out);
  }
};

std::string text_of(const std::vector<SseEvent>& evs) {
  std::string s;
  for (auto& e : evs)
    if (e.event == "delta") s += json::parse(e.data).value("c", "");
  return s;
}

TEST(ConversationRoutes, CreateListRenameSearchDelete) {
  Server s;
  auto a = s.ok("POST", "/ui/api/conversations", {{"title", "Alpha plans"}});
  auto b = s.ok("POST", "/ui/api/conversations", {{"title", "Bravo"}});
  EXPECT_EQ(a["message_count"], 0);
  auto page = s.ok("GET", "/ui/api/conversations?limit=1");
  ASSERT_EQ(page["items"].size(), 1u);
  EXPECT_EQ(page["items"][0]["id"], b["id"]);
  ASSERT_TRUE(page["next_cursor"].is_string());
  auto page2 =
      s.ok("GET", "/ui/api/conversations?limit=1&cursor=" + page["next_cursor"].get<std::string>());
  EXPECT_EQ(page2["items"][0]["id"], a["id"]);
  EXPECT_TRUE(page2["next_cursor"].is_null());
  const std::string aid = a["id"];
  EXPECT_EQ(s.ok("PATCH", "/ui/api/conversations/" + aid, {{"title", "Alpha renamed"}})["title"],
            "Alpha renamed");
  auto hits = s.ok("GET", "/ui/api/conversations/search?q=renam");
  ASSERT_EQ(hits["items"].size(), 1u);
  EXPECT_EQ(hits["items"][0]["conversation"]["id"], aid);
  EXPECT_TRUE(s.ok("GET", "/ui/api/conversations/search?q=%22%28%2A")["items"].empty());
  s.ok("DELETE", "/ui/api/conversations/" + aid);
  EXPECT_EQ(s.call("GET", "/ui/api/conversations/" + aid).status, 404);
  EXPECT_EQ(s.call("DELETE", "/ui/api/conversations/" + aid).status, 404);
}

TEST(ConversationRoutes, BadInputIsAClear4xx) {
  Server s;
  const std::string id = s.ok("POST", "/ui/api/conversations", json::object())["id"];
  struct Case {
    std::string method, target, body;
    int status;
  } cases[] = {
      {"POST", "/ui/api/conversations", "{not json", 400},
      {"POST", "/ui/api/conversations", "[]", 400},
      {"POST", "/ui/api/conversations", R"({"title": 5})", 400},
      {"POST", "/ui/api/conversations", R"({"settings": "x"})", 400},
      {"POST", "/ui/api/conversations", R"({"title": ")" + std::string(600, 'x') + "\"}", 400},
      {"GET", "/ui/api/conversations?limit=0", "", 400},
      {"GET", "/ui/api/conversations?limit=abc", "", 400},
      {"GET", "/ui/api/conversations?cursor=zz", "", 400},
      {"GET", "/ui/api/conversations/search", "", 400},
      {"PATCH", "/ui/api/conversations/" + id, "{}", 400},
      {"PATCH", "/ui/api/conversations/" + id, R"({"leaf_id": "m_nope"})", 400},
      {"PATCH", "/ui/api/conversations/c_nope", R"({"title": "x"})", 404},
      {"POST", "/ui/api/conversations/import", R"({"format": "x"})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers", R"({})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers", R"({"content": ""})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers", R"({"content": 7})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers",
       R"({"content": "hi", "parent_id": "m_nope"})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers", R"({"content": "hi", "think": "x"})",
       400},
      {"POST", "/ui/api/conversations/" + id + "/answers",
       R"({"content": "hi", "temperature": -1})", 400},
      {"POST", "/ui/api/conversations/" + id + "/answers", R"({"content": "hi", "model": "other"})",
       404},
      {"POST", "/ui/api/conversations/c_nope/answers", R"({"content": "hi"})", 404},
      {"GET", "/ui/api/answers/m_nope/events", "", 404},
      {"POST", "/ui/api/answers/m_nope/stop", "", 404},
      {"DELETE", "/ui/api/conversations/" + id + "/messages/m_nope", "", 404},
  };
  for (auto& c : cases) {
    HttpRequest r(c.method, c.target, c.body);
    auto res = s.router->handle(r, [] {});
    EXPECT_EQ(res.status, c.status) << c.method << " " << c.target << " " << c.body;
    auto j = json::parse(res.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << res.body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << res.body;
  }
  // None of them stored anything.
  EXPECT_EQ(s.ok("GET", "/ui/api/conversations/" + id)["messages"].size(), 0u);
}

TEST(ConversationRoutes, AnswersStreamAreStoredAndReattach) {
  Server s;
  const std::string id = s.ok("POST", "/ui/api/conversations", {{"title", "t"}})["id"];
  auto r = s.call("POST", "/ui/api/conversations/" + id + "/answers",
                  {{"content", "What is it?"}, {"seed", 7}, {"temperature", 0.5}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  // Read a few events, then drop the connection as a reloading page does.
  auto first = s.drain(r, 4);
  ASSERT_EQ(first[0].event, "start");
  json start = json::parse(first[0].data);
  const std::string aid = start["assistant_message"]["id"];
  EXPECT_EQ(start["user_message"]["content"], "What is it?");
  EXPECT_EQ(start["assistant_message"]["status"], "streaming");
  const std::string seen = text_of(first);
  const std::string last_id = first.back().id;
  // The answer goes on with nobody attached; re-attach from the last event seen.
  auto again = s.call("GET", "/ui/api/answers/" + aid + "/events?from=" + last_id);
  ASSERT_EQ(again.status, 200) << again.body;
  auto rest = s.drain(again);
  EXPECT_EQ(seen + text_of(rest), kAnswer);
  ASSERT_EQ(rest.back().event, "done");
  json done = json::parse(rest.back().data)["message"];
  EXPECT_EQ(done["content"], kAnswer);
  EXPECT_EQ(done["status"], "done");
  // The request carried the page's settings.
  auto sub = s.gen.submitted();
  ASSERT_EQ(sub.size(), 1u);
  ASSERT_TRUE(sub[0].sampling.seed);
  EXPECT_EQ(*sub[0].sampling.seed, 7u);
  EXPECT_FLOAT_EQ(sub[0].sampling.temperature, 0.5f);
  // Stored: the question and the answer, the answer shown.
  auto conv = s.ok("GET", "/ui/api/conversations/" + id);
  ASSERT_EQ(conv["messages"].size(), 2u);
  EXPECT_EQ(conv["messages"][1]["content"], kAnswer);
  EXPECT_EQ(conv["conversation"]["leaf_id"], aid);
  // Last-Event-ID works as ?from= does.
  HttpRequest lr("GET", "/ui/api/answers/" + aid + "/events");
  lr.headers.add("last-event-id", last_id);
  auto viaheader = s.router->handle(lr, [] {});
  EXPECT_EQ(seen + text_of(s.drain(viaheader)), kAnswer);
}

TEST(ConversationRoutes, RegenerateAndEditKeepBranches) {
  Server s;
  const std::string id = s.ok("POST", "/ui/api/conversations", {{"title", "t"}})["id"];
  auto r1 = s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"content", "q1"}});
  auto e1 = s.drain(r1);
  json st = json::parse(e1[0].data);
  const std::string u1 = st["user_message"]["id"], a1 = st["assistant_message"]["id"];
  // Regenerate: another answer to the same question.
  auto r2 = s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"parent_id", u1}});
  ASSERT_EQ(r2.status, 200) << r2.body;
  auto e2 = s.drain(r2);
  json st2 = json::parse(e2[0].data);
  EXPECT_FALSE(st2.contains("user_message"));
  EXPECT_EQ(st2["assistant_message"]["parent_id"], u1);
  // Regenerating under an answer is refused: answers answer questions.
  EXPECT_EQ(s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"parent_id", a1}}).status,
            400);
  // Edit the question: a sibling of q1 (no parent) with its own answer.
  auto r3 = s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"content", "q1 edited"}});
  s.drain(r3);
  auto conv = s.ok("GET", "/ui/api/conversations/" + id);
  EXPECT_EQ(conv["messages"].size(), 5u);
  int roots = 0;
  for (auto& m : conv["messages"]) roots += m["parent_id"].is_null();
  EXPECT_EQ(roots, 2);
  // Show the first branch again, then delete it.
  s.ok("PATCH", "/ui/api/conversations/" + id, {{"leaf_id", a1}});
  EXPECT_EQ(s.ok("GET", "/ui/api/conversations/" + id)["conversation"]["leaf_id"], a1);
  auto after = s.ok("DELETE", "/ui/api/conversations/" + id + "/messages/" + u1);
  EXPECT_EQ(after["messages"].size(), 2u);
}

TEST(ConversationRoutes, StopEndsARunningAnswer) {
  Server s(std::string(3000, 'z'));
  const std::string id = s.ok("POST", "/ui/api/conversations", {{"title", "t"}})["id"];
  auto r = s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"content", "go"}});
  auto first = s.drain(r, 5);
  const std::string aid = json::parse(first[0].data)["assistant_message"]["id"];
  EXPECT_EQ(s.ok("POST", "/ui/api/answers/" + aid + "/stop")["stopped"], true);
  auto rest = s.call("GET", "/ui/api/answers/" + aid + "/events?from=0");
  auto evs = s.drain(rest);
  ASSERT_EQ(evs.back().event, "done");
  EXPECT_EQ(json::parse(evs.back().data)["message"]["status"], "stopped");
  s.gen.step();
  EXPECT_EQ(s.gen.stats().running, 0);
  EXPECT_EQ(s.ok("POST", "/ui/api/answers/" + aid + "/stop")["stopped"], false);
}

TEST(ConversationRoutes, ExportImportThroughTheRoutes) {
  Server s;
  const std::string id = s.ok("POST", "/ui/api/conversations", {{"title", "Export me"}})["id"];
  auto r = s.call("POST", "/ui/api/conversations/" + id + "/answers", {{"content", "q"}});
  s.drain(r);
  auto ex = s.call("GET", "/ui/api/conversations/" + id + "/export");
  ASSERT_EQ(ex.status, 200);
  EXPECT_NE(std::string(ex.headers.get("content-disposition")).find("attachment"),
            std::string::npos);
  json j = json::parse(ex.body);
  const std::string nid = s.ok("POST", "/ui/api/conversations/import", j)["id"];
  auto conv = s.ok("GET", "/ui/api/conversations/" + nid);
  EXPECT_EQ(conv["conversation"]["title"], "Export me");
  ASSERT_EQ(conv["messages"].size(), 2u);
  EXPECT_EQ(conv["messages"][1]["content"], kAnswer);
}

TEST(ConversationRoutes, WithoutAStoreTheRoutesSay503) {
  LockedFake gen([](const engine::Request&) { return std::vector<engine::TokenId>{}; });
  ServerContext ctx = test_context(gen, tokenizer());
  Router router(ctx);
  HttpRequest r("GET", "/ui/api/conversations");
  auto res = router.handle(r, [] {});
  EXPECT_EQ(res.status, 503);
}

}  // namespace
}  // namespace tandem::server
