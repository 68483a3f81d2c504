// Byte-exact agreement with Hugging Face on the committed goldens: encode over a >= 1 MB
// multilingual corpus (with and without special-token matching), decode of real and random
// id sequences, and invalid UTF-8 input.
#include <gtest/gtest.h>

#include "golden_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"

using namespace tandem::tok;
using namespace tandem::tok::testing;

namespace {

std::string show(const std::vector<TokenId>& v, size_t from) {
  std::string s;
  for (size_t i = from; i < v.size() && i < from + 12; ++i) s += std::to_string(v[i]) + " ";
  return s;
}

// Where two id lists first differ, with the ids around it, for a readable failure.
std::string diff(const std::vector<TokenId>& got, const std::vector<TokenId>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  size_t from = i > 3 ? i - 3 : 0;
  return "first difference at " + std::to_string(i) + ": got [" + show(got, from) + "] want [" +
         show(want, from) + "]";
}

}  // namespace

TEST(TokenizerGolden, EncodeCorpusMatchesHuggingFace) {
  auto rows = read_golden("encode");
  ASSERT_GT(rows.size(), 1000u) << "goldens missing in " << golden_dir();
  auto tok = qwen3();
  size_t bytes = 0, bad = 0, bad_plain = 0, special_rows = 0;
  for (const auto& r : rows) {
    const std::string text = r["text"].get<std::string>();
    bytes += text.size();
    auto want = ids_of(r["ids"]);
    auto got = tok->encode(text, true);
    if (got != want && ++bad <= 5)
      ADD_FAILURE() << "encode differs for text '" << text.substr(0, 80)
                    << "': " << diff(got, want);
    auto want_plain = r.contains("ids_no_special") ? ids_of(r["ids_no_special"]) : want;
    special_rows += r.contains("ids_no_special");
    auto got_plain = tok->encode(text, false);
    if (got_plain != want_plain && ++bad_plain <= 5)
      ADD_FAILURE() << "encode(allow_special=false) differs for '" << text.substr(0, 80)
                    << "': " << diff(got_plain, want_plain);
  }
  EXPECT_EQ(bad, 0u) << "of " << rows.size() << " documents";
  EXPECT_EQ(bad_plain, 0u) << "of " << rows.size() << " documents";
  EXPECT_GE(bytes, 1000000u);
  EXPECT_GT(special_rows, 10u);  // the corpus does exercise special-token text
}

TEST(TokenizerGolden, DecodeMatchesHuggingFace) {
  auto rows = read_golden("decode");
  ASSERT_GT(rows.size(), 500u);
  auto tok = qwen3();
  size_t bad = 0;
  for (const auto& r : rows) {
    auto ids = ids_of(r["ids"]);
    const std::string want = r["text"].get<std::string>();
    const std::string want_skip = r["text_skip"].get<std::string>();
    std::string got = tok->decode(ids, false), got_skip = tok->decode(ids, true);
    // The streaming decoder must give the same text, piece by piece, never broken UTF-8.
    StreamDecoder sd(tok), sd_skip(tok, true);
    std::string streamed, streamed_skip;
    for (TokenId id : ids) {
      std::string piece = sd.push(id);
      EXPECT_EQ(valid_utf8_prefix(piece), piece.size());
      streamed += piece;
      streamed_skip += sd_skip.push(id);
    }
    streamed += sd.flush();
    streamed_skip += sd_skip.flush();
    if ((got != want || got_skip != want_skip || streamed != want || streamed_skip != want_skip) &&
        ++bad <= 5)
      ADD_FAILURE() << "decode differs for ids " << r["ids"].dump() << ": got '" << got
                    << "' want '" << want << "' streamed '" << streamed << "'";
  }
  EXPECT_EQ(bad, 0u);
}

TEST(TokenizerGolden, InvalidUtf8FollowsPythonReplace) {
  auto rows = read_golden("bytes");
  ASSERT_GT(rows.size(), 100u);
  auto tok = qwen3();
  size_t bad = 0;
  for (const auto& r : rows) {
    std::string hex = r["hex"].get<std::string>(), raw;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      raw.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
    const std::string want_text = r["text"].get<std::string>();
    auto want = ids_of(r["ids"]);
    std::string fixed = to_valid_utf8(raw);
    auto got = tok->encode(raw);
    if ((fixed != want_text || got != want) && ++bad <= 5)
      ADD_FAILURE() << "bytes " << hex << ": replaced text "
                    << (fixed == want_text ? "matches" : "differs") << "; " << diff(got, want);
  }
  EXPECT_EQ(bad, 0u);
}
