// Generation + formatters over a scripted engine and the real Qwen3 tokenizer: the text a
// client sees, streamed or not, must match what the script's tokens decode to.
#include <gtest/gtest.h>

#include "fake_generator.h"
#include "server/api_error.h"
#include "server/formatter.h"
#include "server/generation.h"
#include "server/router.h"

using namespace tandem;
using namespace tandem::server;
using tandem::server::testing::FakeGenerator;

namespace {

std::shared_ptr<const tok::Tokenizer> tokenizer() {
  static auto t = tok::load_tokenizer("");
  return t;
}

struct Harness {
  FakeGenerator fake;
  ServerContext ctx;
  explicit Harness(FakeGenerator::Script s, int max_len = 4096)
      : fake(std::move(s), max_len),
        ctx(tandem::server::testing::test_context(fake, tokenizer())) {}
  // Runs a request to the end; returns the formatter's bytes (stream) or body.
  std::string run(const GenRequest& r, Generation** out_gen = nullptr) {
    gen = std::make_unique<Generation>(ctx, r);
    auto fmt = is_openai(r.api) ? make_openai_formatter(*gen, r.model)
                                : make_ollama_formatter(*gen, r.model);
    gen->start([] {});
    std::string out = fmt->start();
    std::vector<ChoiceDelta> ds;
    for (int i = 0; i < 10000; ++i) {
      fake.step();
      ds.clear();
      bool done = gen->poll(ds);
      for (auto& d : ds) out += fmt->delta(d);
      if (done) break;
    }
    EXPECT_TRUE(gen->finished());
    // As the transport does: an engine failure after the start is an error event.
    if (r.stream && !gen->error().empty()) out += fmt->stream_error(gen->error());
    out += fmt->finish(gen->totals());
    if (out_gen) *out_gen = gen.get();
    return out;
  }
  std::unique_ptr<Generation> gen;
};

FakeGenerator::Script says(const std::string& text) {
  return [text](const engine::Request&) { return tokenizer()->encode(text, true); };
}

GenRequest chat(const std::string& user, bool stream) {
  json body = {{"model", "tiny"},
               {"messages", json::array({json{{"role", "user"}, {"content", user}}})},
               {"stream", stream}};
  return parse_openai_chat(body);
}

// Concatenates the fields of every SSE chunk's choices[i].delta.
json collect_sse(const std::string& sse, int* chunks_out = nullptr) {
  json acc = json::object();
  int chunks = 0;
  size_t pos = 0;
  bool done = false;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    size_t end = sse.find("\n\n", pos);
    std::string payload = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    json c = json::parse(payload);
    ++chunks;
    if (c.contains("usage") && !c["usage"].is_null()) acc["usage"] = c["usage"];
    for (auto& ch : c["choices"]) {
      std::string k = std::to_string(ch["index"].get<int>());
      auto& a = acc[k];
      if (a.is_null()) a = json::object();
      for (auto& [f, v] : ch["delta"].items()) {
        if (f == "tool_calls") {
          // As clients do: a call's first delta has its id and name, later ones add to its
          // arguments.
          for (auto& tc : v) {
            size_t i = tc["index"].get<size_t>();
            auto& calls = a["tool_calls"];
            if (i == calls.size()) {
              EXPECT_TRUE(tc.contains("id") && tc["function"].contains("name")) << tc;
              calls.push_back(tc);
            } else {
              EXPECT_LT(i, calls.size()) << tc;
              if (i >= calls.size()) continue;
              EXPECT_FALSE(tc.contains("id")) << tc;
              auto& args = calls[i]["function"]["arguments"];
              args = args.get<std::string>() + tc["function"]["arguments"].get<std::string>();
            }
          }
          a["tool_call_deltas"] = a.value("tool_call_deltas", 0) + 1;
        } else if (v.is_string()) {
          a[f] = a.value(f, std::string()) + v.get<std::string>();
        }
      }
      if (!ch["finish_reason"].is_null()) a["finish_reason"] = ch["finish_reason"];
    }
  }
  EXPECT_TRUE(done) << "no [DONE]";
  if (chunks_out) *chunks_out = chunks;
  return acc;
}

}  // namespace

TEST(Generation, ThinkingIsSplitTheSameStreamedOrNot) {
  const std::string script = "<think>\nThe user greets; answer briefly.\n</think>\n\nHello, wörld!";
  Harness h(says(script));
  json body = json::parse(h.run(chat("hi", false)));
  auto& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "The user greets; answer briefly.");
  EXPECT_EQ(msg["reasoning"], msg["reasoning_content"]);
  EXPECT_EQ(msg["content"], "Hello, wörld!");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  int n = int(tokenizer()->encode(script, true).size());
  EXPECT_EQ(body["usage"]["completion_tokens"], n);
  EXPECT_EQ(body["usage"]["prompt_tokens"], int(h.fake.submitted[0].prompt.size()));
  EXPECT_EQ(body["usage"]["total_tokens"], n + int(h.fake.submitted[0].prompt.size()));
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 3);

  Harness hs(says(script));
  int chunks = 0;
  json acc = collect_sse(hs.run(chat("hi", true)), &chunks);
  EXPECT_EQ(acc["0"]["reasoning_content"], "The user greets; answer briefly.");
  EXPECT_EQ(acc["0"]["content"], "Hello, wörld!");
  EXPECT_EQ(acc["0"]["role"], "assistant");
  EXPECT_EQ(acc["0"]["finish_reason"], "stop");
  EXPECT_GT(chunks, 5);  // token by token, not one lump
}

TEST(Generation, StopStringAcrossTokensNeverLeaks) {
  // " STOP" spans tokens; nothing of it may reach the client, and the engine is cancelled.
  Harness h(says("alpha beta gam STOP delta"));
  GenRequest r = chat("x", true);
  r.stop = {"m STO"};
  json acc = collect_sse(h.run(r));
  EXPECT_EQ(acc["0"]["content"], "alpha beta ga");
  EXPECT_EQ(acc["0"]["finish_reason"], "stop");
  EXPECT_EQ(h.fake.cancels, 1);
}

TEST(Generation, ToolCallsParsedInStreamAndBody) {
  const std::string script =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
      "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  json body = {
      {"model", "tiny"},
      {"messages", json::array({json{{"role", "user"}, {"content", "weather?"}}})},
      {"tools",
       json::array({json{{"type", "function"},
                         {"function", {{"name", "get_weather"}, {"parameters", json::object()}}}},
                    json{{"type", "function"}, {"function", {{"name", "get_time"}}}}})},
      {"chat_template_kwargs", {{"enable_thinking", false}}}};
  Harness h(says(script));
  json out = json::parse(h.run(parse_openai_chat(body)));
  auto& msg = out["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"],
            "Paris");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(out["choices"][0]["finish_reason"], "tool_calls");
  // The tools went into the prompt.
  std::string prompt = tokenizer()->decode(h.fake.submitted[0].prompt);
  EXPECT_NE(prompt.find("<tools>"), std::string::npos);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);

  body["stream"] = true;
  Harness hs(says(script));
  json acc = collect_sse(hs.run(parse_openai_chat(body)));
  ASSERT_EQ(acc["0"]["tool_calls"].size(), 2u);
  EXPECT_EQ(acc["0"]["tool_calls"][1]["index"], 1);
  EXPECT_EQ(acc["0"]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_EQ(acc["0"]["finish_reason"], "tool_calls");
  // The arguments came as they were written, in several deltas, and add up to the body's.
  EXPECT_GT(acc["0"]["tool_call_deltas"].get<int>(), 4);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(acc["0"]["tool_calls"][i]["function"]["arguments"],
              msg["tool_calls"][i]["function"]["arguments"]);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
}

TEST(Generation, ThinkingBudgetForcesCloseAndContinues) {
  auto tok = tokenizer();
  auto close_ids = tok->encode("\n</think>\n\n", true);
  // First request: endless reasoning. The continuation (prompt ends with </think>) answers.
  Harness h([&](const engine::Request& r) {
    bool cont = r.prompt.size() >= close_ids.size() &&
                std::equal(close_ids.begin(), close_ids.end(), r.prompt.end() - close_ids.size());
    return tok->encode(cont ? "Forty-two." : "<think>\nthink think think think think think", true);
  });
  GenRequest r = chat("What is 6*7?", false);
  r.think = true;
  r.thinking_budget = 4;
  json body = json::parse(h.run(r));
  ASSERT_EQ(h.fake.submitted.size(), 2u);
  auto& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Forty-two.");
  std::string reasoning = msg["reasoning_content"];
  EXPECT_FALSE(reasoning.empty());
  EXPECT_EQ(reasoning.find("</think>"), std::string::npos);
  // The continuation holds the first prompt, the tokens generated, then </think>.
  auto& first = h.fake.submitted[0].prompt;
  auto& second = h.fake.submitted[1].prompt;
  EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin()));
  EXPECT_LE(int(second.size() - first.size() - close_ids.size()), 4 + 1);
}

TEST(Generation, NChoicesGetDistinctSeedsAndIndexes) {
  Harness h(says("same text"));
  GenRequest r = chat("x", false);
  r.n = 3;
  r.sampling.seed = 100;
  json body = json::parse(h.run(r));
  ASSERT_EQ(body["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(*h.fake.submitted[i].sampling.seed, 100u + i);
  }
}

TEST(Generation, MaxTokensEndsWithLength) {
  Harness h(says("one two three four five six seven"));
  GenRequest r = chat("x", false);
  r.max_tokens = 3;
  json body = json::parse(h.run(r));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(h.fake.submitted[0].max_tokens, 3);
}

TEST(Generation, OllamaChatFinalLineHasNanosecondTimings) {
  Harness h(says("<think>\nok\n</think>\n\nHi!"));
  json b = {{"model", "tiny"},
            {"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})},
            {"think", true}};
  std::string out = h.run(parse_ollama_chat(b));
  std::vector<json> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t e = out.find('\n', pos);
    lines.push_back(json::parse(out.substr(pos, e - pos)));
    pos = e + 1;
  }
  ASSERT_GE(lines.size(), 3u);
  std::string content, thinking;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["done"], false);
    content += lines[i]["message"]["content"].get<std::string>();
    thinking += lines[i]["message"].value("thinking", "");
  }
  EXPECT_EQ(content, "Hi!");
  EXPECT_EQ(thinking, "ok");
  auto& last = lines.back();
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "stop");
  EXPECT_GT(last["total_duration"].get<int64_t>(), 0);
  EXPECT_GE(last["total_duration"].get<int64_t>(), last["eval_duration"].get<int64_t>());
  EXPECT_EQ(last["eval_count"], int(tokenizer()->encode("<think>\nok\n</think>\n\nHi!").size()));
  EXPECT_EQ(last["prompt_eval_count"], int(h.fake.submitted[0].prompt.size()));
}

TEST(Generation, CompletionsEchoAndLogprobs) {
  Harness h(says(" world"));
  json b = {{"model", "tiny"}, {"prompt", "Hello"}, {"echo", true}, {"logprobs", 1}};
  json body = json::parse(h.run(parse_openai_completion(b)));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello world");
  auto& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), tokenizer()->encode(" world").size());
  EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST(Generation, PromptLongerThanContextIs400) {
  Harness h(says("x"), /*max_len=*/16);
  std::string longtext;
  for (int i = 0; i < 40; ++i) longtext += "word ";
  try {
    Generation g(h.ctx, chat(longtext, false));
    FAIL() << "expected an error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages");
  }
  GenRequest r = chat("hi", false);
  r.max_tokens = 1000;
  try {
    Generation g(h.ctx, r);
    FAIL() << "expected an error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "context_length_exceeded");
  }
}

TEST(Router, UnknownModelAndBadJsonAnsweredInEachApisShape) {
  Harness h(says("x"));
  Router router(h.ctx);
  auto r = router.handle({"POST", "/v1/chat/completions",
                          R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})"},
                         [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found");
  r = router.handle({"POST", "/api/chat", R"({"model":"nope","messages":[]})"}, [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"], "model 'nope' not found");
  r = router.handle({"POST", "/v1/completions", "{\"model\": \"tiny\", "}, [] {});
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(json::parse(r.body)["error"]["message"].is_string());
  r = router.handle({"POST", "/api/generate", R"({"model":"tiny:latest"})"}, [] {});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["done_reason"], "load");
  r = router.handle({"GET", "/nowhere", ""}, [] {});
  EXPECT_EQ(r.status, 404);
  r = router.handle({"DELETE", "/api/tags", ""}, [] {});
  EXPECT_EQ(r.status, 405);
}

TEST(Generation, EngineFailureBecomesAnErrorInEachShape) {
  // Streamed: the text so far, then an error event the SDKs raise, then [DONE].
  Harness h(says("one two three four five"));
  h.fake.fail_after = 2;
  std::string sse = h.run(chat("x", true));
  EXPECT_NE(sse.find("data: {\"error\":{\"message\":\"device lost\""), std::string::npos) << sse;
  EXPECT_EQ(h.gen->error(), "device lost");
  // Not streamed: the router answers 500 in the API's shape.
  Harness h2(says("one two three"));
  h2.fake.fail_after = 1;
  Router router(h2.ctx);
  auto r = router.handle(
      {"POST", "/api/chat",
       R"({"model":"tiny","stream":false,"messages":[{"role":"user","content":"x"}]})"},
      [] {});
  ASSERT_TRUE(r.gen);
  std::vector<ChoiceDelta> ds;
  for (int i = 0; i < 100 && !r.gen->finished(); ++i) {
    h2.fake.step();
    r.gen->poll(ds);
  }
  Router::finish_body(r);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(json::parse(r.body)["error"], "device lost");
}

TEST(Router, FullQueueIs429AndNothingIsSubmitted) {
  Harness h(says("x"));
  h.ctx.opt.max_waiting = 4;
  h.fake.waiting = 4;
  Router router(h.ctx);
  auto r = router.handle({"POST", "/v1/chat/completions",
                          R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})"},
                         [] {});
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_exceeded");
  EXPECT_TRUE(h.fake.submitted.empty());
  h.fake.waiting = 3;
  r = router.handle({"POST", "/api/generate", R"({"model":"tiny","prompt":"hi"})"}, [] {});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(h.fake.submitted.size(), 1u);
}

// /health stays 200 through a failed step and turns 503, with the engine's message, once
// the last three steps all failed; a step that succeeds makes it healthy again.
TEST(Router, HealthTurns503WhileEveryStepFails) {
  Harness h(says("x"));
  Router router(h.ctx);
  auto health = [&] { return router.handle({"GET", "/health", ""}, [] {}); };
  auto r = health();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["status"], "ok");
  h.fake.failed_steps = 2;
  h.fake.failing_steps = 2;
  h.fake.last_error = "CUDA error: an illegal memory access was encountered";
  r = health();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["failed_steps"], 2);
  h.fake.failed_steps = 3;
  h.fake.failing_steps = 3;
  r = health();
  EXPECT_EQ(r.status, 503);
  auto body = json::parse(r.body);
  EXPECT_EQ(body["status"], "failing");
  EXPECT_EQ(body["error"], h.fake.last_error);
  h.fake.failing_steps = 0;
  EXPECT_EQ(health().status, 200);
}

// Ollama's model details name the weights as served (ModelInfo::quantization_level, which
// the model host sets from the runner), in /api/show, /api/tags and /api/ps alike.
TEST(Generation, OllamaDetailsNameTheServedWeights) {
  Harness h([](const engine::Request&) { return std::vector<engine::TokenId>{}; });
  for (const char* level : {"BF16", "FP8"}) {
    h.ctx.model.quantization_level = level;
    Router router(h.ctx);
    const HttpResponse show = router.handle({"POST", "/api/show", R"({"model":"tiny"})"}, [] {});
    ASSERT_EQ(show.status, 200) << show.body;
    EXPECT_EQ(nlohmann::json::parse(show.body)["details"]["quantization_level"], level);
    for (const char* route : {"/api/tags", "/api/ps"}) {
      const HttpResponse r = router.handle({"GET", route, ""}, [] {});
      ASSERT_EQ(r.status, 200) << route << " " << r.body;
      EXPECT_EQ(nlohmann::json::parse(r.body)["models"][0]["details"]["quantization_level"], level)
          << route;
    }
  }
}
