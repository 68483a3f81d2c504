// The native Qwen3 chat template against transformers' apply_chat_template (goldens made
// by scripts/golden/make_tokenizer_goldens.py): rendered text and its ids, byte for byte.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/sha256.h"
#include "golden_util.h"
#include "tokenizer/chat_template.h"

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

TEST(ChatTemplate, RendersThePinnedTemplate) {
  EXPECT_EQ(tandem::sha256_hex(qwen3()->chat_template()), kQwen3ChatTemplateSha256);
}

namespace {
using ojson = nlohmann::ordered_json;

void expect_invalid(const ojson& messages, const std::string& needle, ojson tools = ojson()) {
  try {
    render_chat(messages, tools, ChatOptions{});
    ADD_FAILURE() << "accepted " << messages.dump();
  } catch (const tandem::Error& e) {
    EXPECT_EQ(e.kind(), tandem::ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(ChatTemplate, RejectsMalformedMessages) {
  expect_invalid(ojson::object(), "array");
  expect_invalid(ojson::array(), "empty");
  expect_invalid(ojson::parse(R"([{"role":"wizard","content":"x"}])"), "wizard");
  expect_invalid(ojson::parse(R"([{"content":"x"}])"), "role");
  expect_invalid(ojson::parse(R"([{"role":"user","content":42}])"), "content");
  expect_invalid(ojson::parse(R"([{"role":"user","content":[{"type":"image_url"}]}])"), "text");
  expect_invalid(ojson::parse(R"([{"role":"assistant","content":"","tool_calls":{}}])"),
                 "tool_calls");
  expect_invalid(
      ojson::parse(
          R"([{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":{}}}]}])"),
      "name");
  expect_invalid(ojson::parse(R"([{"role":"assistant","content":"","reasoning_content":1}])"),
                 "reasoning_content");
  expect_invalid(ojson::parse(R"(["hi"])"), "not an object");
  expect_invalid(ojson::parse(R"([{"role":"user","content":"x"}])"), "tools", ojson("x"));
}

TEST(ChatTemplate, NullContentAndTextPartsAreAccepted) {
  auto with_null = ojson::parse(
      R"([{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":{"a":1.5}}}]}])");
  auto with_empty = with_null;
  with_empty[1]["content"] = "";
  ChatOptions opt;
  opt.add_generation_prompt = false;
  EXPECT_EQ(render_chat(with_null, nullptr, opt), render_chat(with_empty, nullptr, opt));
  auto parts = ojson::parse(
      R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])");
  auto joined = ojson::parse(R"([{"role":"user","content":"a\nb"}])");
  EXPECT_EQ(render_chat(parts, nullptr, opt), render_chat(joined, nullptr, opt));
}
