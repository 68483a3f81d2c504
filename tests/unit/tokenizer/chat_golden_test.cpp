// The native Qwen3 chat template against transformers' apply_chat_template (goldens made
// by scripts/golden/make_tokenizer_goldens.py): rendered text and its ids, byte for byte.
#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"
#include "golden_util.h"

using namespace tandem::tok;
using namespace tandem::tok::testing;

TEST(ChatTemplateGolden, MatchesTransformers) {
  auto rows = read_golden("chats");
  ASSERT_GE(rows.size(), 50u);
  auto tok = qwen3();
  size_t with_tools = 0, with_calls = 0, with_tool_msgs = 0, no_think = 0, no_gen = 0;
  for (const auto& r : rows) {
    ASSERT_FALSE(r.contains("error")) << r["name"] << ": " << r["error"];
    ChatOptions opt;
    opt.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    if (!r["enable_thinking"].is_null()) opt.enable_thinking = r["enable_thinking"].get<bool>();
    const std::string want = r["text"].get<std::string>();
    std::string got = render_chat(r["messages"], r["tools"], opt);
    EXPECT_EQ(got, want) << "case " << r["name"];
    EXPECT_EQ(tok->encode(got), ids_of(r["ids"])) << "case " << r["name"];
    with_tools += r["tools"].is_array() && !r["tools"].empty();
    no_think += opt.enable_thinking == false;
    no_gen += !opt.add_generation_prompt;
    for (const auto& m : r["messages"]) {
      with_calls += m.contains("tool_calls");
      with_tool_msgs += m["role"] == "tool";
    }
  }
  // The cases cover what the issue lists (not a vacuous pass).
  EXPECT_GT(with_tools, 10u);
  EXPECT_GT(with_calls, 10u);
  EXPECT_GT(with_tool_msgs, 10u);
  EXPECT_GT(no_think, 5u);
  EXPECT_GT(no_gen, 5u);
}
