// The Responses API below the HTTP layer: the bounded store, the request parser (items ->
// messages, effort -> thinking, refusals naming the field), background runs and their
// cancellation, and an engine failure in a stream.
#include <gtest/gtest.h>

#include <thread>

#include "fake_generator.h"
#include "server/api_error.h"
#include "server/responses.h"
#include "server/router.h"

using namespace tandem;
using namespace tandem::server;
using tandem::server::testing::FakeGenerator;

namespace {

std::shared_ptr<const tok::Tokenizer> tokenizer() {
  static auto t = tok::load_tokenizer("");
  return t;
}

ResponseStore::Entry entry(size_t text_bytes) {
  ResponseStore::Entry e;
  e.response = {{"status", "completed"}, {"pad", std::string(text_bytes, 'x')}};
  e.conversation = json::array({{{"id", "msg_a"}, {"type", "message"}}});
  e.input = json::array();
  return e;
}

json post(Router& router, const std::string& target, const json& body, int* status = nullptr) {
  HttpRequest req("POST", target, body.dump());
  HttpResponse r = router.handle(req, [] {});
  if (status) *status = r.status;
  return json::parse(r.body);
}

json get(Router& router, const std::string& target, int* status = nullptr) {
  HttpResponse r = router.handle(HttpRequest("GET", target), [] {});
  if (status) *status = r.status;
  return json::parse(r.body);
}

}  // namespace

TEST(ResponseStore, EvictsTheLeastRecentlyUsedByCountAndBytes) {
  ResponseStore s({3, 5000});
  for (const char* id : {"a", "b", "c"}) s.put(id, entry(10));
  ASSERT_TRUE(s.get("a"));  // a is now the most recent
  s.put("d", entry(10));
  EXPECT_FALSE(s.get("b"));
  EXPECT_TRUE(s.get("a") && s.get("c") && s.get("d"));
  s.put("e", entry(4900));  // over the bytes: the oldest go until it fits
  EXPECT_LE(s.size(), 2u);
  EXPECT_TRUE(s.get("e"));
  s.put("huge", entry(50000));  // alone over the limit: kept, everything else goes
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.get("huge"));
  EXPECT_TRUE(s.find_item("msg_a"));
  EXPECT_TRUE(s.erase("huge"));
  EXPECT_FALSE(s.erase("huge"));
  s.put("huge", entry(1));  // erased stays erased
  EXPECT_FALSE(s.get("huge"));
}

TEST(ResponsesRequest, ItemsBecomeTheChatTurns) {
  ResponseStore store;
  json body = json::parse(R"({"model": "m", "instructions": "Be brief.",
    "input": [
      {"role": "developer", "content": "Use metric units."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather"},
                                                      {"type": "input_text", "text": "?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
      {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"c\": 1}"},
      {"type": "function_call", "call_id": "c2", "name": "t", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
      {"role": "assistant", "content": "It is sunny."},
      {"role": "user", "content": "Thanks"}],
    "reasoning": {"effort": "low"}, "max_output_tokens": 77, "top_logprobs": 2})");
  ResponsesRequest r = parse_responses_request(body, store);
  const auto& m = r.gen.messages;
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].role, "system");
  EXPECT_EQ(m[2].content, "Weather?");
  EXPECT_EQ(m[3].role, "assistant");
  EXPECT_EQ(m[3].reasoning, "Call it.");
  ASSERT_EQ(m[3].tool_calls.size(), 2u);
  EXPECT_EQ(m[3].tool_calls[1].name, "t");
  EXPECT_EQ(m[4].role, "tool");
  EXPECT_EQ(m[4].tool_call_id, "c1");
  EXPECT_EQ(m[5].content, "noon");
  EXPECT_EQ(m[6].content, "It is sunny.");
  EXPECT_TRUE(r.gen.think.value_or(false));
  EXPECT_EQ(r.gen.thinking_budget.value_or(-1), 1024);
  EXPECT_EQ(r.gen.max_tokens.value_or(0), 77);
  EXPECT_TRUE(r.gen.logprobs && r.output_logprobs);
  // Every input item got an id; string content became parts.
  for (auto& it : r.input) EXPECT_TRUE(it.contains("id")) << it;
  EXPECT_EQ(r.input[7]["content"][0]["type"], "output_text");
  body["reasoning"] = {{"effort", "minimal"}};
  EXPECT_FALSE(parse_responses_request(body, store).gen.think.value_or(true));
}

TEST(ResponsesRequest, RefusalsNameTheField) {
  ResponseStore store;
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input": "x"})", "model"},
      {R"({"model": "m"})", "input"},
      {R"({"model": "m", "input": 3})", "input"},
      {R"({"model": "m", "input": []})", "input"},
      {R"({"model": "m", "input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"model": "m", "input": [{"role": "user"}]})", "input[0].content"},
      {R"({"model": "m", "input": [{"type": "function_call", "name": "f"}]})", "input[0].call_id"},
      {R"({"model": "m", "input": [{"type": "function_call_output", "call_id": "c"}]})",
       "input[0].output"},
      {R"({"model": "m", "input": [{"type": "item_reference", "id": "msg_nope"}]})", "input[0].id"},
      {R"({"model": "m", "input": [{"type": "file_search_call"}]})", "input[0].type"},
      {R"({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file"}]}]})",
       "input[0].content[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function"}]})", "tools[0].name"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "mcp"}]})", "tools[0].type"},
      {R"({"model": "m", "input": "x", "tool_choice": "required"})", "tool_choice"},
      {R"({"model": "m", "input": "x", "tool_choice": {"type": "function", "name": "f"}})",
       "tool_choice"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}})",
       "text.format"},
      {R"({"model": "m", "input": "x", "reasoning": {"summary": "long"}})", "reasoning.summary"},
      {R"({"model": "m", "input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"model": "m", "input": "x", "top_logprobs": 21})", "top_logprobs"},
      {R"({"model": "m", "input": "x", "previous_response_id": "resp_gone"})",
       "previous_response_id"},
      {R"({"model": "m", "input": "x", "background": true, "stream": true})", "background"},
      {R"({"model": "m", "input": "x", "background": true, "store": false})", "store"},
      {R"({"model": "m", "input": "x", "prompt": {"id": "p"}})", "prompt"},
      {R"({"model": "m", "input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"model": "m", "input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"model": "m", "input": "x", "include": "x"})", "include"},
  };
  for (auto& [body, param] : cases) {
    try {
      parse_responses_request(json::parse(body), store);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), param) << body << ": " << e.what();
      EXPECT_TRUE(e.status() == 400 || e.status() == 404) << body;
    }
  }
}

TEST(Responses, BackgroundRunIsPolledAndCancelled) {
  auto tok = tokenizer();
  std::string endless;
  for (int i = 0; i < 400; ++i) endless += " word";
  FakeGenerator fake([&](const engine::Request&) { return tok->encode(endless, true); });
  ServerContext ctx = tandem::server::testing::test_context(fake, tok);
  Router router(ctx);
  int status = 0;
  json r = post(router, "/v1/responses",
                {{"model", "tiny"},
                 {"input", "go"},
                 {"background", true},
                 {"reasoning", {{"effort", "none"}}}},
                &status);
  ASSERT_EQ(status, 200) << r;
  EXPECT_EQ(r["status"], "in_progress");
  const std::string id = r["id"];
  for (int i = 0; i < 20; ++i) fake.step();
  EXPECT_EQ(get(router, "/v1/responses/" + id)["status"], "in_progress");
  json c = post(router, "/v1/responses/" + id + "/cancel", json::object(), &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(c["status"], "cancelled");
  json g;
  for (int i = 0; i < 400; ++i) {
    fake.step();
    g = get(router, "/v1/responses/" + id);
    if (g["status"] != "in_progress") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(g["status"], "cancelled");
  EXPECT_EQ(fake.cancels, 1);
  ASSERT_EQ(g["output"].size(), 1u);
  std::string text = g["output"][0]["content"][0]["text"];
  EXPECT_GT(text.size(), 10u);  // what it wrote before the cancel
  EXPECT_LT(text.size(), endless.size());
  // Deleting it: gone, and cancelling it then is a 404.
  post(router, "/v1/responses/" + id + "/cancel", json::object(), &status);
  HttpResponse d = router.handle(HttpRequest("DELETE", "/v1/responses/" + id), [] {});
  EXPECT_EQ(d.status, 200);
  EXPECT_EQ(json::parse(d.body)["deleted"], true);
  get(router, "/v1/responses/" + id, &status);
  EXPECT_EQ(status, 404);
}

TEST(Responses, EngineFailureMidStreamIsResponseFailed) {
  auto tok = tokenizer();
  FakeGenerator fake(
      [&](const engine::Request&) { return tok->encode("one two three four", true); });
  fake.fail_after = 2;
  ServerContext ctx = tandem::server::testing::test_context(fake, tok);
  Router router(ctx);
  HttpRequest req(
      "POST", "/v1/responses",
      json{
          {"model", "tiny"}, {"input", "go"}, {"stream", true}, {"reasoning", {{"effort", "none"}}}}
          .dump());
  HttpResponse r = router.handle(req, [] {});
  ASSERT_TRUE(r.gen && r.stream);
  std::string out = r.fmt->start();
  std::vector<ChoiceDelta> ds;
  for (int i = 0; i < 100; ++i) {
    fake.step();
    ds.clear();
    bool done = r.gen->poll(ds);
    for (auto& d : ds) out += r.fmt->delta(d);
    if (done) break;
  }
  ASSERT_FALSE(r.gen->error().empty());
  out += r.fmt->stream_error(r.gen->error());
  out += r.fmt->finish(r.gen->totals());
  EXPECT_NE(out.find("event: error\n"), std::string::npos);
  size_t last = out.rfind("event: ");
  EXPECT_EQ(out.substr(last, 23), "event: response.failed\n");
  json failed = json::parse(out.substr(out.find("data: ", last) + 6));
  EXPECT_EQ(failed["response"]["status"], "failed");
  EXPECT_EQ(failed["response"]["error"]["code"], "server_error");
  const std::string id = failed["response"]["id"];
  EXPECT_EQ(get(router, "/v1/responses/" + id)["status"], "failed");
}
