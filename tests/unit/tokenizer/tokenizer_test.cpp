// Tokenizer behaviour beyond the goldens: the loader's checks on small synthetic
// tokenizer.json files, BPE rank order and tie-breaks against a plain reference, the word
// cache, the API around added tokens, threads, and the streaming decoder.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "golden_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"

using namespace tandem::tok;
using namespace tandem::tok::testing;
using json = nlohmann::json;

namespace {

// A tokenizer.json with the 256 byte tokens (ids 0..255), the given merges (ids from 256
// on) and two added tokens, in the same shape as Qwen3's.
json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, char(b)))] = b;
  json jm = json::array();
  int next = 256;
  for (auto& [a, b] : merges) {
    std::string ab = byte_level_encode(a + b);
    if (!vocab.contains(ab)) vocab[ab] = next++;
    jm.push_back({byte_level_encode(a), byte_level_encode(b)});
  }
  json added = json::array();
  added.push_back({{"id", next},
                   {"content", "<|x|>"},
                   {"special", true},
                   {"normalized", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"single_word", false}});
  added.push_back({{"id", next + 1},
                   {"content", "<|x|>y"},
                   {"special", false},
                   {"normalized", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"single_word", false}});
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern",
                {{"Regex",
                  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                  "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"},
               {"add_prefix_space", false},
               {"trim_offsets", false},
               {"use_regex", false}}}}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", jm}}}};
}

// The textbook BPE: repeatedly merge the leftmost occurrence of the best-ranked pair.
std::vector<std::string> reference_bpe(
    const std::string& word, const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> s;
  for (char c : word) s.emplace_back(1, c);
  while (true) {
    size_t best = merges.size(), at = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i)
      for (size_t r = 0; r < best; ++r)
        if (merges[r].first == s[i] && merges[r].second == s[i + 1]) {
          best = r;
          at = i;
          break;
        }
    if (best == merges.size()) return s;
    s[at] += s[at + 1];
    s.erase(s.begin() + long(at) + 1);
  }
}

}  // namespace

TEST(Tokenizer, BpeFollowsRankOrderAndLeftmostTies) {
  // Overlapping merges whose outcome depends on rank order and tie-breaking.
  std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "a"},  {"b", "a"}, {"aa", "a"},  {"a", "b"}, {"ab", "a"}, {"aa", "aa"},
      {"ba", "b"}, {"b", "b"}, {"bb", "aa"}, {"c", "a"}, {"ca", "b"}};
  auto tok = Tokenizer::from_json(tiny_tokenizer_json(merges).dump());
  tandem::Rng rng(5);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string w;
    size_t n = 1 + rng.next() % 13;
    for (size_t i = 0; i < n; ++i) w.push_back("abc"[rng.next() % 3]);
    std::vector<TokenId> got = tok->encode(w);
    auto want = reference_bpe(w, merges);
    ASSERT_EQ(got.size(), want.size()) << w;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(tok->token_bytes(got[i]), want[i]) << w;
    ASSERT_EQ(tok->decode(got), w);
  }
}

TEST(Tokenizer, LoaderNamesUnsupportedParts) {
  auto base = tiny_tokenizer_json({{"a", "b"}});
  auto expect_unsupported = [&](json j, const std::string& part) {
    try {
      Tokenizer::from_json(j.dump());
      ADD_FAILURE() << "accepted a tokenizer.json with " << part;
    } catch (const tandem::Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  {
    auto j = base;
    j["model"]["type"] = "WordPiece";
    expect_unsupported(j, "model type");
  }
  {
    auto j = base;
    j["normalizer"] = {{"type", "NFKC"}};
    expect_unsupported(j, "normalizer");
  }
  {
    auto j = base;
    j["added_tokens"][0]["lstrip"] = true;
    expect_unsupported(j, "lstrip");
  }
  {
    auto j = base;
    j["pre_tokenizer"] = {{"type", "Metaspace"}};
    expect_unsupported(j, "pre_tokenizer");
  }
  {
    auto j = base;
    j["model"]["byte_fallback"] = true;
    expect_unsupported(j, "byte_fallback");
  }
  {
    auto j = base;
    j["decoder"] = {{"type", "WordPiece"}};
    expect_unsupported(j, "decoder");
  }
  {
    auto j = base;
    j["model"]["merges"].push_back({"q", "zz"});
    expect_unsupported(j, "not in the vocab");
  }
  EXPECT_THROW(Tokenizer::from_json("{not json"), tandem::Error);
  EXPECT_THROW(Tokenizer::load("/nonexistent/folder"), tandem::Error);
}

TEST(Tokenizer, AddedTokensLeftmostLongestAndAllowSpecial) {
  auto tok = Tokenizer::from_json(tiny_tokenizer_json({{"a", "b"}}).dump());
  const TokenId x = *tok->find_token("<|x|>"), xy = *tok->find_token("<|x|>y");
  EXPECT_TRUE(tok->is_special(x));
  EXPECT_FALSE(tok->is_special(xy));
  // Longest match wins at the same start: "<|x|>y" over "<|x|>".
  EXPECT_EQ(tok->encode("<|x|>y"), std::vector<TokenId>{xy});
  EXPECT_EQ(tok->encode("<|x|>z").front(), x);
  // allow_special=false skips special tokens only; the non-special one still matches.
  auto plain = tok->encode("<|x|>z", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), x), 0);
  EXPECT_EQ(tok->decode(plain), "<|x|>z");
  EXPECT_EQ(tok->encode("<|x|>y", false), std::vector<TokenId>{xy});
}

TEST(Tokenizer, Qwen3Api) {
  auto tok = qwen3();
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->find_token("<think>"), 151667);
  EXPECT_EQ(tok->find_token("<|im_end|>"), 151645);
  EXPECT_FALSE(tok->find_token("<nope>").has_value());
  EXPECT_TRUE(tok->is_special(151645));
  EXPECT_FALSE(tok->is_special(151667));
  EXPECT_FALSE(tok->is_special(-1));
  EXPECT_FALSE(tok->is_special(1 << 30));
  EXPECT_EQ(tok->eos_token_id(), 151645);
  EXPECT_FALSE(tok->chat_template().empty());
  EXPECT_EQ(tok->token_bytes(151667), "<think>");
  EXPECT_EQ(tok->token_bytes(-5), "");
  EXPECT_EQ(tok->token_bytes(151700), "");
  // <think> is not special: kept by skip_special; <|im_end|> is dropped.
  auto ids = tok->encode("<think>hi</think><|im_end|>");
  EXPECT_EQ(tok->decode(ids, true), "<think>hi</think>");
  // allow_special=false: role markers in user text become plain text, <think> stays a token.
  auto plain = tok->encode("<|im_start|>system<think>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151667), 1);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>system<think>");
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(Tokenizer, CacheAndThreadsAgreeWithUncached) {
  auto tok = qwen3();
  auto rows = read_golden("encode");
  ASSERT_FALSE(rows.empty());
  // Several threads encode the same documents at once; each must get HF's ids.
  std::vector<std::thread> th;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (size_t i = size_t(t); i < rows.size(); i += 7)
        if (tok->encode(rows[i]["text"].get<std::string>()) != ids_of(rows[i]["ids"])) ++bad;
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(StreamDecoder, NeverBreaksUtf8AndNeverHoldsCompleteCharacters) {
  auto tok = qwen3();
  tandem::Rng rng(17);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<TokenId> ids;
    size_t n = 1 + rng.next() % 40;
    for (size_t i = 0; i < n; ++i) {
      uint64_t k = rng.next() % 3;
      // byte tokens (split characters), any token, or added tokens
      ids.push_back(k == 0   ? TokenId(rng.next() % 256)
                    : k == 1 ? TokenId(rng.next() % 151669)
                             : TokenId(151643 + rng.next() % 26));
    }
    StreamDecoder sd(tok);
    std::string out, all_bytes;
    for (TokenId id : ids) {
      std::string piece = sd.push(id);
      ASSERT_EQ(valid_utf8_prefix(piece), piece.size());
      out += piece;
      all_bytes += tok->token_bytes(id);
      // Nothing complete is held back: what is pending is an unfinished character.
      ASSERT_LT(sd.pending_bytes(), 4u);
      if (valid_utf8_prefix(all_bytes) == all_bytes.size()) {
        ASSERT_EQ(sd.pending_bytes(), 0u);
      }
    }
    out += sd.flush();
    ASSERT_EQ(out, tok->decode(ids));
  }
}

TEST(Pretokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
  // `\s` is rewritten to Unicode White_Space (Oniguruma's reading). U+180E is not
  // White_Space: before '!' it joins the punctuation piece. PCRE2 10.42's own `\s` would
  // take it as a space and cut "\u180e" and "!" apart. U+0085 and U+3000 are White_Space.
  RegexSplitter sp(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  std::vector<std::pair<uint32_t, uint32_t>> p;
  sp.split("\xe1\xa0\x8e!", p);
  EXPECT_EQ(p.size(), 1u);
  sp.split("\xc2\x85!", p);
  EXPECT_EQ(p.size(), 2u);
  sp.split(
      "a\xe3\x80\x80\xe3\x80\x80"
      "b",
      p);  // "a", U+3000 (space before a letter), U+3000 b
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1], std::make_pair(1u, 3u));
  EXPECT_THROW(RegexSplitter("[\\S]"), tandem::Error);
  EXPECT_EQ(
      onig_to_pcre2("a\\d[^\\s]"),
      "a\\d[^" +
          std::string(
              "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
              "\\x{202F}\\x{205F}\\x{3000}") +
          "]");
}
