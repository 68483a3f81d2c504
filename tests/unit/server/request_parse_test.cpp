// Request validation: every bad field is a 400 naming the field; good requests map to the
// right GenRequest values.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/gen_request.h"
#include "server/thinking.h"

using namespace tandem::server;

namespace {
json base_chat() {
  return json{{"model", "m"},
              {"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})}};
}

std::string param_of(const std::function<void()>& f, int* status = nullptr) {
  try {
    f();
  } catch (const ApiError& e) {
    if (status) *status = e.status();
    return e.param();
  }
  return "<no error>";
}
}  // namespace

TEST(OpenAIParse, BadFieldsNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* want_param;
  };
  std::vector<Case> cases = {
      {"temperature", "hot", "temperature"},
      {"temperature", 2.5, "temperature"},
      {"temperature", -0.1, "temperature"},
      {"top_p", 1.5, "top_p"},
      {"top_k", 2.5, "top_k"},
      {"max_tokens", 0, "max_tokens"},
      {"max_tokens", -5, "max_tokens"},
      {"max_tokens", 1e12, "max_tokens"},
      {"max_completion_tokens", "10", "max_completion_tokens"},
      {"n", 0, "n"},
      {"n", 1000, "n"},
      {"stop", json::array({"a", "b", "c", "d", "e"}), "stop"},
      {"stop", 7, "stop"},
      {"stop", json::array({""}), "stop"},
      {"presence_penalty", 3, "presence_penalty"},
      {"frequency_penalty", -2.1, "frequency_penalty"},
      {"seed", 1.5, "seed"},
      {"stream", "yes", "stream"},
      {"logprobs", 1, "logprobs"},
      {"response_format", json{{"type", "json_object"}}, "response_format"},
      {"response_format", json{{"type", "json_schema"}, {"json_schema", json::object()}},
       "response_format"},
      {"tool_choice", "sometimes", "tool_choice"},
      {"tool_choice", "required", "tool_choice"},
      {"tools", json::array({json{{"type", "function"}}}), "tools"},
      {"tools", "all", "tools"},
      {"messages", json::array(), "messages"},
      {"messages", "hi", "messages"},
      {"messages", json::array({json{{"role", "wizard"}, {"content", "x"}}}), "messages[0].role"},
      {"messages", json::array({json{{"content", "x"}}}), "messages[0].role"},
      {"messages", json::array({json{{"role", "user"}, {"content", 5}}}), "messages[0].content"},
      {"messages",
       json::array(
           {json{{"role", "user"}, {"content", json::array({json{{"type", "image_url"}}})}}}),
       "messages[0].content"},
      {"model", 3, "model"},
      {"logit_bias", json{{"50", 10}}, "logit_bias"},
      {"chat_template_kwargs", json{{"enable_thinking", "no"}}, "enable_thinking"},
  };
  for (auto& c : cases) {
    json b = base_chat();
    b[c.field] = c.value;
    int status = 0;
    EXPECT_EQ(param_of([&] { parse_openai_chat(b); }, &status), c.want_param)
        << c.field << " = " << c.value.dump();
    EXPECT_EQ(status, 400) << c.field;
  }
  int status = 0;
  EXPECT_EQ(param_of([&] { parse_openai_chat(json::array()); }, &status), "");
  EXPECT_EQ(status, 400);
  json b = base_chat();
  b["top_logprobs"] = 3;  // needs logprobs: true
  EXPECT_EQ(param_of([&] { parse_openai_chat(b); }), "top_logprobs");
}

TEST(OpenAIParse, GoodChatMapsEveryField) {
  json b = base_chat();
  b["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array({json{{"id", "c1"},
                          {"type", "function"},
                          {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}})}});
  b["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}});
  b["messages"].push_back({{"role", "developer"},
                           {"content", json::array({json{{"type", "text"}, {"text", "a"}},
                                                    json{{"type", "text"}, {"text", "b"}}})}});
  b.update(json{{"temperature", 0.3},
                {"top_p", 0.9},
                {"top_k", 7},
                {"min_p", 0.05},
                {"presence_penalty", 0.5},
                {"frequency_penalty", -0.5},
                {"repetition_penalty", 1.1},
                {"seed", -1},
                {"max_tokens", 9},
                {"max_completion_tokens", 11},
                {"n", 2},
                {"stop", "END"},
                {"stream", true},
                {"stream_options", {{"include_usage", true}}},
                {"logprobs", true},
                {"top_logprobs", 2},
                {"response_format", {{"type", "text"}}},
                {"tools", json::array({json{{"type", "function"}, {"function", {{"name", "f"}}}}})},
                {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
                {"chat_template_kwargs", {{"enable_thinking", false}, {"thinking_budget", 64}}}});
  GenRequest r = parse_openai_chat(b);
  EXPECT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  EXPECT_EQ(r.messages[3].role, "system");
  EXPECT_EQ(r.messages[3].content, "ab");
  EXPECT_DOUBLE_EQ(*r.sampling.temperature, 0.3);
  EXPECT_EQ(*r.sampling.top_k, 7);
  EXPECT_EQ(*r.sampling.seed, ~uint64_t(0));
  EXPECT_EQ(*r.max_tokens, 11);  // max_completion_tokens wins
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "f");
  EXPECT_EQ(r.think, false);
  EXPECT_EQ(*r.thinking_budget, 64);
}

TEST(OpenAIParse, CompletionPrompts) {
  auto p = [](json prompt) {
    return parse_openai_completion(json{{"model", "m"}, {"prompt", prompt}});
  };
  EXPECT_EQ(p("hi").prompts.size(), 1u);
  EXPECT_EQ(p(json::array({"a", "b"})).prompts.size(), 2u);
  EXPECT_EQ(p(json::array({1, 2, 3})).prompt_ids[0].size(), 3u);
  EXPECT_EQ(p(json::array({json::array({1}), json::array({2, 3})})).prompt_ids.size(), 2u);
  for (json bad : {json(""), json(5), json::array(), json::array({-1}),
                   json::array({json::array()}), json::array({"a", 1}), json(nullptr)}) {
    EXPECT_EQ(param_of([&] { p(bad); }), "prompt") << bad.dump();
  }
  EXPECT_EQ(param_of([&] {
              parse_openai_completion(json{{"model", "m"}, {"prompt", "x"}, {"suffix", "y"}});
            }),
            "suffix");
  EXPECT_EQ(param_of([&] {
              parse_openai_completion(json{{"model", "m"}, {"prompt", "x"}, {"best_of", 3}});
            }),
            "best_of");
}

TEST(OllamaParse, OptionsAndRefusals) {
  json b = {{"model", "m"},
            {"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})},
            {"options",
             {{"num_ctx", 2048},
              {"num_predict", 17},
              {"temperature", 0.2},
              {"top_k", 5},
              {"top_p", 0.7},
              {"min_p", 0.1},
              {"repeat_penalty", 1.2},
              {"repeat_last_n", 32},
              {"seed", 42},
              {"stop", json::array({"x", "y"})}}},
            {"keep_alive", "10m"},
            {"think", "high"}};
  GenRequest r = parse_ollama_chat(b);
  EXPECT_TRUE(r.stream);  // Ollama streams by default
  EXPECT_EQ(*r.num_ctx, 2048);
  EXPECT_EQ(*r.max_tokens, 17);
  EXPECT_DOUBLE_EQ(*r.sampling.repetition_penalty, 1.2);
  EXPECT_EQ(*r.sampling.penalty_last_n, 32);
  EXPECT_EQ(*r.sampling.seed, 42u);
  EXPECT_EQ(r.stop.size(), 2u);
  EXPECT_EQ(r.think, true);
  json g = {{"model", "m"}, {"prompt", "p"}, {"options", {{"seed", -1}, {"num_predict", -1}}}};
  GenRequest rg = parse_ollama_generate(g);
  EXPECT_FALSE(rg.sampling.seed.has_value());
  EXPECT_FALSE(rg.max_tokens.has_value());

  struct Bad {
    json body;
    const char* param;
  };
  std::vector<Bad> bads = {
      {{{"model", "m"}, {"prompt", "p"}, {"format", "json"}}, "format"},
      {{{"model", "m"}, {"prompt", "p"}, {"format", {{"type", "object"}}}}, "format"},
      {{{"model", "m"}, {"prompt", "p"}, {"template", "{{ .Prompt }}"}}, "template"},
      {{{"model", "m"}, {"prompt", "p"}, {"images", json::array({"aGk="})}}, "images"},
      {{{"model", "m"}, {"prompt", "p"}, {"options", {{"temperature", "warm"}}}}, "temperature"},
      {{{"model", "m"}, {"prompt", "p"}, {"options", {{"num_predict", 0}}}}, "num_predict"},
      {{{"model", "m"}, {"prompt", "p"}, {"options", {{"num_ctx", -1}}}}, "num_ctx"},
      {{{"model", "m"}, {"prompt", "p"}, {"options", 3}}, "options"},
      {{{"model", "m"}, {"prompt", "p"}, {"think", "very"}}, "think"},
      {{{"model", "m"}, {"prompt", "p"}, {"keep_alive", json::array()}}, "keep_alive"},
      {{{"prompt", "p"}}, "model"},
  };
  for (auto& c : bads) {
    int status = 0;
    EXPECT_EQ(param_of([&] { parse_ollama_generate(c.body); }, &status), c.param) << c.body.dump();
    EXPECT_EQ(status, 400);
  }
  json badrole = {{"model", "m"},
                  {"messages", json::array({json{{"role", "bot"}, {"content", "x"}}})}};
  EXPECT_EQ(param_of([&] { parse_ollama_chat(badrole); }), "messages[0].role");
}

TEST(Thinking, PrecedenceAndAutoRule) {
  GenRequest r = parse_openai_chat(base_chat());
  EXPECT_TRUE(resolve_thinking(r, ThinkingDefault::kOn));
  EXPECT_FALSE(resolve_thinking(r, ThinkingDefault::kOff));
  EXPECT_FALSE(resolve_thinking(r, ThinkingDefault::kAuto));  // "hi" is short chat
  r.messages[0].content = "Why is the sky blue?";
  EXPECT_TRUE(resolve_thinking(r, ThinkingDefault::kAuto));
  r.messages[0].content = "what is 12 * 7";
  EXPECT_TRUE(resolve_thinking(r, ThinkingDefault::kAuto));
  r.messages[0].content = "Why is the sky blue? /no_think";
  EXPECT_FALSE(resolve_thinking(r, ThinkingDefault::kOn));
  r.messages.push_back(Message{"user", "ok now /think please", {}, {}, {}, {}});
  EXPECT_TRUE(resolve_thinking(r, ThinkingDefault::kOff));
  r.think = false;  // the request's own switch wins over everything
  EXPECT_FALSE(resolve_thinking(r, ThinkingDefault::kOn));
  std::string longtext;
  for (int i = 0; i < kAutoLongWords; ++i) longtext += "word ";
  EXPECT_TRUE(auto_wants_thinking(longtext));
  EXPECT_FALSE(auto_wants_thinking("hello there, how are you"));
  EXPECT_FALSE(auto_wants_thinking("an unsolved mystery"));  // cues count at word starts only
}
