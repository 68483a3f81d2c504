// The per-request record and the completion hooks: what a log line or a metric reads once a
// request is over, filled by the router, the generation and the transport.
#include <gtest/gtest.h>

#include "fake_generator.h"
#include "server/router.h"

namespace tandem::server {
namespace {

using testing::FakeGenerator;

struct Rig {
  std::shared_ptr<const tok::Tokenizer> tok = tok::load_tokenizer("");
  FakeGenerator fake{[this](const engine::Request&) { return tok->encode("a b c", true); }};
  ServerContext ctx = testing::test_context(fake, tok);
  Router router{ctx};
  std::vector<RequestRecord> seen;
  Rig() {
    router.add_completion_hook([this](const RequestRecord& r) { seen.push_back(r); });
  }
  // Runs a generation to its end as the transport would (poll after every step).
  void drive(HttpResponse& r) {
    std::vector<ChoiceDelta> d;
    while (!r.gen->poll(d)) {
      for (auto& x : d) r.fmt->delta(x);
      d.clear();
      fake.step();
    }
    for (auto& x : d) r.fmt->delta(x);
  }
};

HttpRequest post(std::string path, std::string body) {
  HttpRequest q("POST", std::move(path), std::move(body));
  q.headers.add("Content-Type", "application/json");
  q.remote = "127.0.0.1";
  return q;
}

TEST(RequestRecord, AGenerationReportsItsRouteTokensTimesAndFinish) {
  Rig rig;
  HttpRequest q = post("/v1/chat/completions",
                       R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})");
  q.received = std::chrono::steady_clock::now() - std::chrono::milliseconds(5);
  HttpResponse r = rig.router.handle(q, [] {});
  ASSERT_TRUE(r.gen);
  rig.drive(r);
  Router::finish_body(r);
  r.record.status = r.status;
  rig.router.complete(r);
  ASSERT_EQ(rig.seen.size(), 1u);
  const RequestRecord& rec = rig.seen[0];
  EXPECT_EQ(rec.route, "/v1/chat/completions");
  EXPECT_EQ(rec.api, "openai");
  EXPECT_EQ(rec.method, "POST");
  EXPECT_EQ(rec.model, "tiny");
  EXPECT_EQ(rec.remote, "127.0.0.1");
  EXPECT_EQ(rec.status, 200);
  EXPECT_EQ(rec.finish_reason, "stop");
  EXPECT_EQ(rec.completion_tokens, int(rig.tok->encode("a b c", true).size()));
  EXPECT_EQ(rec.prompt_tokens, int(rig.fake.submitted.at(0).prompt.size()));
  EXPECT_EQ(rec.cached_tokens, 3);  // as the fake engine reports it
  EXPECT_GE(rec.duration_ms, 5.0);  // counted from the request's arrival
  EXPECT_GE(rec.ttft_ms, 5.0);
  EXPECT_LE(rec.ttft_ms, rec.duration_ms);
  EXPECT_GE(rec.queue_ms, 5.0);
  EXPECT_LE(rec.queue_ms, rec.ttft_ms);
  EXPECT_TRUE(rec.error.empty());
  EXPECT_EQ(rec.id.rfind("req_", 0), 0u);
  EXPECT_EQ(r.headers.get("x-request-id"), rec.id);
}

TEST(RequestRecord, ErrorsCarryTheirMessageAndEveryAnswerItsRequestId) {
  Rig rig;
  HttpRequest q = post("/api/chat", R"({"model":"nope","messages":[]})");
  q.headers.add("X-Request-Id", "client-id_1.2:3");
  HttpResponse r = rig.router.handle(q, [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.headers.get("x-request-id"), "client-id_1.2:3");
  rig.router.complete(r);
  ASSERT_EQ(rig.seen.size(), 1u);
  EXPECT_EQ(rig.seen[0].id, "client-id_1.2:3");
  EXPECT_EQ(rig.seen[0].status, 404);
  EXPECT_EQ(rig.seen[0].api, "ollama");
  EXPECT_EQ(rig.seen[0].route, "/api/chat");
  EXPECT_EQ(rig.seen[0].error, "model 'nope' not found");
  EXPECT_EQ(rig.seen[0].finish_reason, "");

  // An id with spaces, quotes or of 129 characters is replaced, never echoed.
  for (std::string bad : {std::string("a b"), std::string("x\"y"), std::string(129, 'a'),
                          std::string("\r\nSet-Cookie: x")}) {
    HttpRequest q2("GET", "/nowhere");
    q2.headers.add("x-request-id", bad);
    HttpResponse r2 = rig.router.handle(q2, [] {});
    EXPECT_EQ(r2.status, 404);
    EXPECT_NE(r2.headers.get("x-request-id"), bad);
    EXPECT_EQ(r2.headers.get("x-request-id").rfind("req_", 0), 0u);
  }
  EXPECT_EQ(sane_request_id(std::string(128, 'z')), std::string(128, 'z'));
}

TEST(RequestRecord, TheTransportsOwnErrorsTakeThePathsShapeAndARecordToo) {
  Rig rig;
  HttpRequest q("POST", "/v1/completions");
  HttpResponse r = rig.router.transport_error(q, 413, "request body too large");
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("\"message\":\"request body too large\""), std::string::npos);
  EXPECT_FALSE(r.headers.get("x-request-id").empty());
  HttpRequest q2("POST", "/api/generate");
  HttpResponse r2 = rig.router.transport_error(q2, 413, "request body too large");
  EXPECT_EQ(r2.body, R"({"error":"request body too large"})");
  rig.router.complete(r2, "cancelled");
  ASSERT_EQ(rig.seen.size(), 1u);
  EXPECT_EQ(rig.seen[0].route, "/api/generate");
  EXPECT_EQ(rig.seen[0].status, 413);
  EXPECT_EQ(rig.seen[0].finish_reason, "cancelled");
}

TEST(RequestRecord, AHookThatThrowsDoesNotStopTheOthers) {
  Rig rig;
  int after = 0;
  rig.router.add_completion_hook([](const RequestRecord&) { throw std::runtime_error("x"); });
  rig.router.add_completion_hook([&](const RequestRecord&) { ++after; });
  HttpResponse r = rig.router.handle(HttpRequest("GET", "/api/version"), [] {});
  EXPECT_EQ(r.status, 200);
  rig.router.complete(r);
  EXPECT_EQ(after, 1);
  EXPECT_EQ(rig.seen.size(), 1u);
}

}  // namespace
}  // namespace tandem::server
