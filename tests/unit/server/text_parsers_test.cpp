// The streamed text filters (stop strings, <think> split, hermes tool calls) against simple
// whole-text references, on random texts cut at random points.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "server/reasoning_parser.h"
#include "server/stop_matcher.h"
#include "server/tool_call_parser.h"

using namespace tandem::server;

namespace {

// Random text from fragments that collide with tags and stop strings.
std::string random_text(std::mt19937& g, const std::vector<std::string>& extra) {
  std::vector<std::string> frags = {"a",  "bc",  " ",   "\n",  "é",  "世界", "<",  ">",  "/",
                                    "th", "ink", "<th", "END", "EN", "D",    "##", "x y"};
  frags.insert(frags.end(), extra.begin(), extra.end());
  std::string s;
  int n = std::uniform_int_distribution<int>(0, 40)(g);
  for (int i = 0; i < n; ++i) s += frags[g() % frags.size()];
  return s;
}

// Cuts `s` into random pieces (never inside a UTF-8 sequence: the decoder sends whole chars).
std::vector<std::string> random_pieces(std::mt19937& g, const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1 + g() % 5;
    size_t j = std::min(s.size(), i + len);
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string ref_stop(const std::string& s, const std::vector<std::string>& stops, bool& hit) {
  size_t first = std::string::npos;
  for (auto& st : stops) first = std::min(first, s.find(st));
  hit = first != std::string::npos;
  return hit ? s.substr(0, first) : s;
}

std::string trim_lead(std::string s) {
  size_t i = s.find_first_not_of(" \n\t\r");
  return i == std::string::npos ? "" : s.substr(i);
}
std::string trim_trail(std::string s) {
  size_t i = s.find_last_not_of(" \n\t\r");
  return i == std::string::npos ? "" : s.substr(0, i + 1);
}

SplitText ref_split(const std::string& s, bool in_think) {
  SplitText out;
  std::string rest = s;
  if (!in_think) {
    std::string t = trim_lead(s);
    if (t.rfind("<think>", 0) != 0) {
      out.content = s;
      return out;
    }
    rest = t.substr(7);
  }
  size_t close = rest.find("</think>");
  if (close == std::string::npos) {
    out.reasoning = trim_trail(trim_lead(rest));
    return out;
  }
  out.reasoning = trim_trail(trim_lead(rest.substr(0, close)));
  out.content = trim_lead(rest.substr(close + 8));
  return out;
}

}  // namespace

TEST(StopMatcher, MatchesWholeTextReferenceOnRandomCuts) {
  std::mt19937 g(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    int ns = g() % 4;
    const char* cands[] = {"END", "<th", "\n\n", "世界", "a a", "##x", "D#"};
    for (int i = 0; i < ns; ++i) stops.push_back(cands[g() % 7]);
    std::string text = random_text(g, {});
    bool hit;
    std::string want = ref_stop(text, stops, hit);
    StopMatcher m(stops);
    std::string got;
    bool stopped = false;
    for (auto& p : random_pieces(g, text)) {
      auto o = m.push(p);
      // Nothing sent may ever extend past the stop.
      got += o.text;
      ASSERT_EQ(want.compare(0, std::min(got.size(), want.size()), got, 0,
                             std::min(got.size(), want.size())),
                0);
      ASSERT_LE(got.size(), want.size()) << text;
      if (o.stopped) {
        stopped = true;
        break;
      }
    }
    if (!stopped) got += m.finish();
    EXPECT_EQ(stopped, hit) << text;
    EXPECT_EQ(got, want) << text;
  }
}

TEST(StopMatcher, NothingHeldWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("EN").text, "EN");
  EXPECT_EQ(m.finish(), "");
}

TEST(ReasoningParser, StreamEqualsWholeTextReference) {
  std::mt19937 g(99);
  for (int iter = 0; iter < 3000; ++iter) {
    bool in_think = g() % 3 == 0;
    std::string text = random_text(g, {"<think>", "</think>", "</thi", "\n\n"});
    if (!in_think && g() % 2) text = std::string(g() % 2 ? "\n" : "") + "<think>\n" + text;
    SplitText want = ref_split(text, in_think);
    ReasoningParser p(in_think);
    SplitText got;
    for (auto& piece : random_pieces(g, text)) {
      auto o = p.push(piece);
      got.reasoning += o.reasoning;
      got.content += o.content;
    }
    auto o = p.finish();
    got.reasoning += o.reasoning;
    got.content += o.content;
    EXPECT_EQ(got.reasoning, want.reasoning) << "text: [" << text << "] in_think " << in_think;
    EXPECT_EQ(got.content, want.content) << "text: [" << text << "] in_think " << in_think;
  }
}

TEST(ReasoningParser, QwenShapes) {
  ReasoningParser p;
  auto a = p.push("<think>\nLet me see.\n</think>\n\nHello!");
  EXPECT_EQ(a.reasoning, "Let me see.");
  EXPECT_EQ(a.content, "Hello!");
  EXPECT_TRUE(p.closed());
  ReasoningParser q;  // thinking off: the prompt closed the block, output is all answer
  auto b = q.push("Hi there");
  b.content += q.finish().content;
  EXPECT_EQ(b.content, "Hi there");
  EXPECT_EQ(b.reasoning, "");
  ReasoningParser r(/*in_think=*/true);  // template opened <think>: no tag in the output
  auto c = r.push("step 1\n</think>\n\n42");
  EXPECT_EQ(c.reasoning, "step 1");
  EXPECT_EQ(c.content, "42");
}

TEST(ReasoningParser, HoldsPartialTagUntilResolved) {
  ReasoningParser p(true);
  EXPECT_EQ(p.push("abc</th").reasoning, "abc");
  auto o = p.push("ink>x");
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "x");
  ReasoningParser q(true);
  q.push("abc</th");
  EXPECT_EQ(q.push("e").reasoning, "</the");
}

TEST(ToolCallParser, ParsesSeveralCallsAndKeepsLeadingText) {
  std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "{\"tz\": \"CET\", \"n\": 2}}\n</tool_call>";
  std::mt19937 g(5);
  for (int iter = 0; iter < 200; ++iter) {
    ToolCallParser p;
    ToolDelta all;
    for (auto& piece : random_pieces(g, text)) {
      auto d = p.push(piece);
      all.content += d.content;
      for (auto& c : d.calls) all.calls.push_back(c);
    }
    auto d = p.finish();
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(c);
    ASSERT_EQ(all.calls.size(), 2u);
    EXPECT_EQ(all.content, "Let me check.\n");
    EXPECT_EQ(all.calls[0].name, "get_weather");
    EXPECT_EQ(all.calls[0].arguments, "{\"city\": \"Paris\"}");  // as the model wrote it
    EXPECT_EQ(all.calls[1].name, "get_time");
    EXPECT_EQ(nlohmann::json::parse(all.calls[1].arguments)["n"], 2);
  }
}

TEST(ToolCallParser, MalformedCallIsReturnedAsText) {
  const char* bad[] = {"<tool_call>\n{\"name\": \"f\", \"arguments\": 7}\n</tool_call>",
                       "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1,2]</tool_call>",
                       "<tool_call>{\"name\": \"f\"",
                       "<tool_call>{\"name\": \"\", \"arguments\": {}}"};
  for (const char* t : bad) {
    ToolCallParser p;
    auto d = p.push(t);
    auto e = p.finish();
    EXPECT_TRUE(d.calls.empty() && e.calls.empty()) << t;
    EXPECT_EQ(d.content + e.content, t);
  }
}

TEST(ToolCallParser, UnterminatedValidCallAtEndIsACall) {
  ToolCallParser p;
  auto d = p.push("<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\":1}\"}\n");
  EXPECT_TRUE(d.calls.empty());
  auto e = p.finish();
  ASSERT_EQ(e.calls.size(), 1u);
  EXPECT_EQ(e.calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(e.content, "");
}

TEST(ToolCallParser, PlainTextPassesThroughWithoutHoldingMore) {
  ToolCallParser p;
  EXPECT_EQ(p.push("hello <").content, "hello ");
  EXPECT_EQ(p.push("b>").content, "<b>");
  EXPECT_EQ(p.finish().content, "");
}

namespace {
// Feeds `text` in random pieces; returns everything, with the pieces' order checked.
ToolDelta parse_in_pieces(std::mt19937& g, const std::string& text) {
  ToolCallParser p;
  ToolDelta all;
  auto take = [&](ToolDelta d) {
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(c);
    for (auto& q : d.pieces) {
      if (!all.pieces.empty() && all.pieces.back().kind == q.kind &&
          (q.kind == ToolPiece::Kind::kText || q.kind == ToolPiece::Kind::kCallArgs))
        all.pieces.back().text += q.text;
      else
        all.pieces.push_back(q);
    }
  };
  for (auto& piece : random_pieces(g, text)) take(p.push(piece));
  take(p.finish());
  return all;
}
}  // namespace

TEST(ToolCallParser, StreamsArgumentsAsTheyAreWritten) {
  const std::string args =
      "{\"q\": \"a } in \\\"quotes\\\" and </tool_call> inside\", \"n\": [1, {\"x\": []}], "
      "\"u\": \"\xe6\x99\xb4\"}";
  const std::string text = "Sure.\n<tool_call>\n{\"name\": \"search\", \"arguments\": " + args +
                           "}\n</tool_call>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
                           "{}}\n</tool_call>\nDone.";
  std::mt19937 g(11);
  for (int iter = 0; iter < 300; ++iter) {
    ToolDelta all = parse_in_pieces(g, text);
    ASSERT_EQ(all.calls.size(), 2u);
    EXPECT_EQ(all.calls[0].name, "search");
    EXPECT_EQ(all.calls[0].arguments, args);
    EXPECT_EQ(all.calls[1].arguments, "{}");
    EXPECT_EQ(all.content, "Sure.\n\nDone.");
    using K = ToolPiece::Kind;
    std::vector<K> kinds;
    for (auto& q : all.pieces) kinds.push_back(q.kind);
    ASSERT_EQ(kinds, (std::vector<K>{K::kText, K::kCallBegin, K::kCallArgs, K::kCallEnd,
                                     K::kCallBegin, K::kCallArgs, K::kCallEnd, K::kText}));
    EXPECT_EQ(all.pieces[1].text, "search");
    EXPECT_EQ(all.pieces[2].text, args);
    EXPECT_EQ(all.pieces[7].text, "\nDone.");
  }
  // The name and the first argument bytes come before the call is closed.
  ToolCallParser p;
  auto d = p.push("<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"par");
  ASSERT_EQ(d.pieces.size(), 2u);
  EXPECT_EQ(d.pieces[0].text, "search");
  EXPECT_EQ(d.pieces[1].text, "{\"q\": \"par");
  EXPECT_TRUE(d.calls.empty());
}

TEST(ToolCallParser, AStartedCallStaysACall) {
  // Once its name and the arguments' brace are out, a call is a call: unbalanced or cut
  // arguments end it as written (streamed and whole alike).
  std::mt19937 g(3);
  for (int iter = 0; iter < 50; ++iter) {
    ToolDelta a = parse_in_pieces(
        g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>x");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].arguments, "{\"a\": }");
    EXPECT_EQ(a.content, "x");
    ToolDelta b = parse_in_pieces(
        g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1,</tool_call>y");
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(b.calls[0].arguments, "{\"a\": [1,");
    EXPECT_EQ(b.content, "y");
    ToolDelta c = parse_in_pieces(g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"cut");
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].arguments, "{\"a\": \"cut");
    EXPECT_EQ(c.content, "");
  }
}

TEST(ToolCallParser, OtherCallLayoutsAreParsedWhole) {
  std::mt19937 g(5);
  for (int iter = 0; iter < 50; ++iter) {
    ToolDelta a =
        parse_in_pieces(g,
                        "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>"
                        "<tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"b\\\": 2}\"}</tool_call>");
    ASSERT_EQ(a.calls.size(), 2u);
    EXPECT_EQ(a.calls[0].name, "f");
    EXPECT_EQ(a.calls[0].arguments, "{\"a\":1}");
    EXPECT_EQ(a.calls[1].arguments, "{\"b\": 2}");
    ASSERT_EQ(a.pieces.size(), 6u);
    EXPECT_EQ(a.pieces[1].text, "{\"a\":1}");
  }
}
