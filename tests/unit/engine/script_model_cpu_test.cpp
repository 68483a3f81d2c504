// Scripted test models (model/script_model.h) run through the engine on the CPU backend: the
// text comes out token for token, greedy or sampled, with thinking on or off, after a tool
// result, behind long and noisy prompts and in a batch; texts that cannot be scripted are
// refused with a reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/paths.h"
#include "engine/engine_core.h"
#include "model/cpu_runner.h"
#include "model/script_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace tandem::engine {
namespace {

const std::string kText =
    "<think>\nThe user asks about the weather in Paris. I should call get_weather with "
    "\"Paris\" and \"celsius\".\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>";
const std::string kToolText =
    "<think>\nThe tool says 22 and sunny.\n</think>\n\nIt is sunny in Paris: 22 \xc2\xb0"
    "C. \xe6\x99\xb4\xe5\xa4\xa9!";
const std::string kAnswer =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
    "\"celsius\"}}\n</tool_call>";

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("tandem_script_" + std::to_string(::getpid()) + "_" + name);
}

fs::path tokenizer_dir() {
  auto tok = find_tokenizer_source();
  if (!tok) throw std::runtime_error("run `make deps` first: the npm tokenizer is missing");
  return *tok;
}

class ScriptModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch("tool");
    fs::remove_all(dir_);
    model::write_script_model(dir_, {kText, kToolText}, tokenizer_dir());
    tok_ = tok::Tokenizer::load(dir_);
    model::CpuRunnerOptions ro;
    ro.threads = 2;
    ro.max_model_len = 8192;
    ro.num_blocks = 2048;
    runner_ = model::make_cpu_runner(dir_, ro).release();
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
    fs::remove_all(dir_);
  }

  static std::vector<TokenId> chat(const nlohmann::ordered_json& messages, bool thinking,
                                   bool tools = true) {
    nlohmann::ordered_json t = nlohmann::ordered_json::array();
    if (tools)
      t.push_back({{"type", "function"},
                   {"function",
                    {{"name", "get_weather"},
                     {"parameters",
                      {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}});
    tok::ChatOptions o;
    o.enable_thinking = thinking;
    return tok_->encode(tok::render_chat(messages, t, o));
  }

  // Runs the requests together; returns each one's generated text and finish reason.
  static std::vector<std::pair<std::string, FinishReason>> run(std::vector<Request> reqs) {
    EngineOptions opt;
    opt.max_num_seqs = 32;
    opt.max_num_batched_tokens = 512;
    opt.eos_ids = {151645, 151643};
    EngineCore core(*runner_, opt);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (size_t i = 0; i < reqs.size(); ++i) {
      core.validate(reqs[i]);
      hs.push_back(std::make_shared<RequestHandle>(i + 1));
      core.add(i + 1, reqs[i], hs.back());
    }
    while (core.has_work()) core.step();
    std::vector<std::pair<std::string, FinishReason>> out;
    for (auto& h : hs) {
      std::vector<Event> evs;
      h->drain(evs);
      std::vector<TokenId> ids;
      FinishReason why = FinishReason::kError;
      for (auto& e : evs) {
        if (e.kind == Event::Kind::kToken)
          ids.push_back(e.token);
        else
          why = e.reason;
      }
      if (!ids.empty() && ids.back() == 151645) ids.pop_back();  // EOS ends the text
      out.push_back({tok_->decode(ids), why});
    }
    return out;
  }

  static Request greedy(std::vector<TokenId> prompt) {
    Request r;
    r.prompt = std::move(prompt);
    r.max_tokens = 300;
    r.sampling.temperature = 0.0f;
    return r;
  }

  static nlohmann::ordered_json user(const std::string& s) {
    return nlohmann::ordered_json::array({{{"role", "user"}, {"content", s}}});
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const tok::Tokenizer> tok_;
  static inline model::Runner* runner_ = nullptr;
};

TEST_F(ScriptModel, WritesTheTextWithThinkingOnAndTheAnswerWithThinkingOff) {
  auto out = run({greedy(chat(user("What is the weather in Paris?"), true)),
                  greedy(chat(user("Weather?"), false))});
  EXPECT_EQ(out[0].first, kText);
  EXPECT_EQ(out[0].second, FinishReason::kStop);
  EXPECT_EQ(out[1].first, kAnswer);
  EXPECT_EQ(out[1].second, FinishReason::kStop);
}

TEST_F(ScriptModel, SamplingWritesTheSameText) {
  std::vector<Request> reqs;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Request r = greedy(chat(user("Paris weather, please."), true));
    r.sampling.temperature = seed % 2 ? 1.0f : 0.6f;
    r.sampling.top_p = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.seed = seed;
    reqs.push_back(std::move(r));
  }
  for (auto& [text, why] : run(std::move(reqs))) EXPECT_EQ(text, kText);
}

TEST_F(ScriptModel, WritesTheToolTextAfterAToolResult) {
  nlohmann::ordered_json m = user("What is the weather in Paris?");
  m.push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        {{{"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  m.push_back({{"role", "tool"}, {"content", "{\"temp\": 22, \"sky\": \"sunny\"}"}});
  auto out = run({greedy(chat(m, true)), greedy(chat(m, false))});
  EXPECT_EQ(out[0].first, kToolText);
  EXPECT_EQ(out[1].first,
            "It is sunny in Paris: 22 \xc2\xb0"
            "C. \xe6\x99\xb4\xe5\xa4\xa9!");
}

TEST_F(ScriptModel, ContinuesAForcedCallStart) {
  // What tool_choice required and a named tool_choice write into the prompt (server/prepare).
  const auto base = tok_->decode(chat(user("Weather?"), false));
  auto required = tok_->encode(base + "<tool_call>\n{\"name\": \"");
  auto named = tok_->encode(base + "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  auto out = run({greedy(required), greedy(named)});
  EXPECT_EQ("<tool_call>\n{\"name\": \"" + out[0].first, kAnswer);
  EXPECT_EQ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + out[1].first, kAnswer);
}

TEST_F(ScriptModel, LongNoisyPromptsAndTheTextInTheHistory) {
  std::mt19937 g(7);
  std::vector<Request> reqs;
  for (int len : {1, 37, 600, 3001}) {
    std::string noise;
    std::vector<TokenId> ids;
    for (int i = 0; i < len; ++i) ids.push_back(TokenId(g() % 151643));
    noise = tok_->decode(ids);
    reqs.push_back(greedy(chat(user(noise), true)));
  }
  // A previous turn that wrote the same text, and the script's own tokens in the question.
  nlohmann::ordered_json m = user(kText + kText);
  m.push_back({{"role", "assistant"}, {"content", "It was sunny yesterday."}});
  m.push_back({{"role", "user"}, {"content", "And today? " + kAnswer}});
  reqs.push_back(greedy(chat(m, true, false)));
  for (auto& [text, why] : run(std::move(reqs))) EXPECT_EQ(text, kText);
}

TEST_F(ScriptModel, AnUnknownContextEndsAtOnce) {
  auto out = run({greedy(tok_->encode("Once upon a time")),
                  greedy(tok_->encode("<|im_start|>user\nhi<|im_end|>\n"))});
  for (auto& [text, why] : out) {
    EXPECT_EQ(text, "");
    EXPECT_EQ(why, FinishReason::kStop);
  }
}

TEST(ScriptModelWrite, RefusesTextsItCannotScript) {
  const fs::path out = scratch("bad");
  fs::remove_all(out);
  auto expect_refused = [&](const std::string& text, const std::string& why) {
    try {
      model::write_script_model(out, {text, ""}, tokenizer_dir());
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));  // nothing half-written
  };
  expect_refused("Hi<|im_end|>more", "must not hold");
  expect_refused("<|im_start|>user", "must not hold");
  std::string run;
  for (int i = 0; i < 40; ++i) run += " a";
  expect_refused(run, "cannot be scripted");
}

TEST(ScriptModelWrite, RepetitiveButScriptableTextNeedsMoreContext) {
  const fs::path out = scratch("rep");
  fs::remove_all(out);
  // "x y" repeated, then a different ending: told apart only by the header far back.
  std::string text;
  for (int i = 0; i < 6; ++i) text += " x y";
  text += " z";
  auto info = model::write_script_model(out, {text, ""}, tokenizer_dir());
  EXPECT_GE(info.context, 8);
  model::CpuRunnerOptions ro;
  ro.threads = 2;
  ro.max_model_len = 512;
  auto runner = model::make_cpu_runner(out, ro);
  auto tok = tok::Tokenizer::load(out);
  EngineOptions opt;
  opt.eos_ids = {151645};
  EngineCore core(*runner, opt);
  Request r;
  r.prompt = tok->encode("<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n");
  r.max_tokens = 64;
  r.sampling.temperature = 0.0f;
  auto h = std::make_shared<RequestHandle>(1);
  core.validate(r);
  core.add(1, r, h);
  while (core.has_work()) core.step();
  std::vector<Event> evs;
  h->drain(evs);
  std::vector<TokenId> ids;
  for (auto& e : evs)
    if (e.kind == Event::Kind::kToken && e.token != 151645) ids.push_back(e.token);
  EXPECT_EQ(tok->decode(ids), text);
  fs::remove_all(out);
}

}  // namespace
}  // namespace tandem::engine
