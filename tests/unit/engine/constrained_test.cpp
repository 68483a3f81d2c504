// Constrained decoding through the engine on the Qwen3 vocabulary: every sampler setting,
// n > 1, the runner paths, prefix caching and preemption keep outputs inside the
// constraint; thinking first leaves the output free until the start token; one failing
// constraint ends only its own request.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "structured/constraint.h"
#include "structured/lexer.h"
#include "tokenizer/tokenizer.h"

namespace tandem::engine::testing {
namespace {

constexpr int kQwenRows = 151936;

struct Qwen {
  std::shared_ptr<const tok::Tokenizer> tok = tok::load_tokenizer("");
  std::vector<TokenId> eos{*tok->find_token("<|im_end|>"), *tok->find_token("<|endoftext|>")};
  std::shared_ptr<const structured::Vocabulary> vocab =
      structured::Vocabulary::from_tokenizer(*tok, kQwenRows, eos);
};
const Qwen& qwen() {
  static Qwen q;
  return q;
}

std::shared_ptr<const structured::TokenConstraint> constraint(structured::ConstraintSpec spec,
                                                              int32_t start_after = -1) {
  auto c = std::make_shared<structured::TokenConstraint>();
  c->grammar = structured::compile(spec);
  c->vocab = qwen().vocab;
  c->start_after = start_after;
  return c;
}

structured::ConstraintSpec schema_spec(const std::string& s) {
  structured::ConstraintSpec spec;
  spec.kind = structured::ConstraintKind::kJsonSchema;
  spec.text = s;
  spec.max_whitespace = 2;
  return spec;
}

// Whether `text` is in the constraint's language (a fresh matcher takes it and may end).
bool in_language(const structured::TokenConstraint& c, const std::string& text) {
  structured::Matcher m(c.grammar, c.vocab);
  return m.accept_bytes(text) && m.can_end();
}

EngineOptions options(int max_seqs = 16) {
  EngineOptions o = test_options(max_seqs, 512);
  o.eos_ids = qwen().eos;
  o.mask_threads = 2;
  return o;
}

const char* kPerson = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":0,"maximum":130},
  "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":2},
  "ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false})";

}  // namespace

TEST(Constrained, EverySamplerSettingStaysInside) {
  auto c = constraint(schema_spec(kPerson));
  std::vector<SamplingParams> settings(7);
  settings[0].temperature = 0.0f;
  settings[1].temperature = 1.0f;
  settings[2].temperature = 0.7f, settings[2].top_p = 0.9f;
  settings[3].temperature = 1.2f, settings[3].top_k = 40;
  settings[4].temperature = 0.9f, settings[4].min_p = 0.05f;
  settings[5].temperature = 0.8f, settings[5].repetition_penalty = 1.3f;
  settings[5].presence_penalty = 0.5f, settings[5].frequency_penalty = 0.4f;
  settings[6].temperature = 0.0f, settings[6].top_logprobs = 3;
  for (bool runner_paths : {false, true}) {
    Harness h(kQwenRows, 16, 256, options());
    h.runner.greedy = h.runner.sampling = runner_paths;  // no masks there: the host path
    std::vector<std::shared_ptr<RequestHandle>> hs;
    std::vector<int> ns;
    for (size_t i = 0; i < settings.size(); ++i) {
      Request r;
      r.prompt = make_prompt(int(100 + i), 20, uint32_t(i), 50000);
      r.max_tokens = 200;
      r.sampling = settings[i];
      r.sampling.seed = 40 + i;
      r.n = i == 1 ? 3 : 1;
      r.constraint = c;
      ns.push_back(r.n);
      hs.push_back(h.submit(std::move(r)));
    }
    h.run();
    EXPECT_EQ(h.runner.greedy_forwards + h.runner.sample_forwards, 0);
    for (size_t i = 0; i < hs.size(); ++i) {
      Outcome o = collect(*hs[i], ns[i]);
      for (int k = 0; k < ns[i]; ++k) {
        std::string text = qwen().tok->decode(o.tokens[size_t(k)]);
        EXPECT_EQ(o.finish[size_t(k)].reason, FinishReason::kStop) << i << ": " << text;
        EXPECT_TRUE(in_language(*c, text)) << text;
        auto j = nlohmann::json::parse(text, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << text;
        EXPECT_TRUE(j.contains("name") && j.contains("age") && j.contains("ok")) << text;
      }
    }
  }
}

// Greedy outputs are the same whether sequences are preempted (a small cache) or not, and
// whether the prompt comes from the prefix cache.
TEST(Constrained, PreemptionAndPrefixCachingKeepTheOutput) {
  auto c = constraint(schema_spec(
      R"({"type":"array","items":{"type":"integer","minimum":-50,"maximum":50},"minItems":3,"maxItems":6})"));
  auto run = [&](int blocks, bool caching) {
    EngineOptions o = options(8);
    o.enable_prefix_caching = caching;
    Harness h(kQwenRows, 4, blocks, o);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    auto shared = make_prompt(9, 12, 3, 50000);
    for (int i = 0; i < 8; ++i) {
      auto p = shared;
      p.push_back(TokenId(1000 + i));
      Request r = greedy_request(p, 40);
      r.constraint = c;
      hs.push_back(h.submit(std::move(r)));
      if (i == 0) h.run();  // the others find its prompt blocks in the cache
    }
    h.run();
    std::vector<std::string> out;
    for (auto& hd : hs) out.push_back(qwen().tok->decode(collect(*hd, 1).tokens[0]));
    return std::make_pair(out, h.core.stats());
  };
  auto [big, st_big] = run(512, true);
  auto [small, st_small] = run(24, true);
  auto [nocache, st_nc] = run(512, false);
  EXPECT_GT(st_small.preemptions, 0u);
  EXPECT_GT(st_big.prefix_cache_hits, 0u);
  EXPECT_EQ(big, small);
  EXPECT_EQ(big, nocache);
  for (const std::string& t : big) EXPECT_TRUE(in_language(*c, t)) << t;
}

// With thinking first, the tokens before (and including) the start token are free.
TEST(Constrained, StartsAfterTheStartToken) {
  structured::ConstraintSpec choice;
  choice.kind = structured::ConstraintKind::kChoice;
  choice.choices = {"yes", "no"};
  auto prompt = make_prompt(5, 10, 8, 50000);
  auto free_run = reference_tokens(prompt, 4, kQwenRows);
  auto c = constraint(choice, free_run[2]);
  Harness h(kQwenRows, 16, 64, options());
  Request r = greedy_request(prompt, 30);
  r.constraint = c;
  auto hd = h.submit(std::move(r));
  h.run();
  Outcome o = collect(*hd, 1);
  ASSERT_GT(o.tokens[0].size(), 3u);
  EXPECT_EQ(std::vector<TokenId>(o.tokens[0].begin(), o.tokens[0].begin() + 3),
            std::vector<TokenId>(free_run.begin(), free_run.begin() + 3));
  std::string rest =
      qwen().tok->decode(std::vector<TokenId>(o.tokens[0].begin() + 3, o.tokens[0].end()));
  EXPECT_TRUE(rest == "yes" || rest == "no") << rest;
  EXPECT_EQ(o.finish[0].reason, FinishReason::kStop);
}

// A constraint that fails while computing its mask (here: too small a lexer) ends its own
// request with an error; the others finish normally.
TEST(Constrained, AFailingConstraintEndsOnlyItsRequest) {
  auto bad = std::make_shared<structured::TokenConstraint>();
  {
    structured::ConstraintSpec s =
        schema_spec(R"({"type":"string","pattern":"^[a-z]{3}[0-9]{3}$"})");
    auto g = structured::compile(s);
    // The same grammar with a lexer limited to 3 states.
    auto store = std::make_unique<structured::ExprStore>(g->store_locked());
    bad->grammar = std::make_shared<structured::CompiledGrammar>(std::move(store), g->grammar(), 3);
  }
  bad->vocab = qwen().vocab;
  auto good = constraint(schema_spec(R"({"enum":["alpha","beta"]})"));
  Harness h(kQwenRows, 16, 64, options());
  Request a = greedy_request(make_prompt(1, 8, 1, 50000), 20);
  a.constraint = bad;
  Request b = greedy_request(make_prompt(2, 8, 2, 50000), 20);
  b.constraint = good;
  auto ha = h.submit(std::move(a));
  auto hb = h.submit(std::move(b));
  h.run();
  Outcome oa = collect(*ha, 1), ob = collect(*hb, 1);
  EXPECT_EQ(oa.finish[0].reason, FinishReason::kError);
  EXPECT_NE(oa.finish[0].error.find("constraint"), std::string::npos) << oa.finish[0].error;
  EXPECT_EQ(ob.finish[0].reason, FinishReason::kStop);
  std::string t = qwen().tok->decode(ob.tokens[0]);
  t.erase(0, t.find_first_not_of(" \t\r\n"));  // whitespace may come first
  EXPECT_TRUE(t == "\"alpha\"" || t == "\"beta\"") << t;
}

}  // namespace tandem::engine::testing
