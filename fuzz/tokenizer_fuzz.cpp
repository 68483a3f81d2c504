// libFuzzer target over the tokenizer and the chat template with arbitrary bytes.
// The first input byte picks the entry point; the rest is its input. Checks, besides "no
// crash, no sanitizer report": encode/decode round trips on NFC text, the streaming decoder
// equals decode and never emits broken UTF-8, and the template fails only with tandem::Error.
// Build and run: fuzz/run.sh [seconds]
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/paths.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace tandem;
using namespace tandem::tok;

namespace {

std::shared_ptr<const Tokenizer> tokenizer() {
  static std::shared_ptr<const Tokenizer> t = [] {
    auto dir = find_tokenizer_source();
    if (!dir) {
      std::fprintf(stderr, "fuzz: Qwen3 tokenizer files not found\n");
      std::abort();
    }
    return Tokenizer::load(*dir);
  }();
  return t;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: check failed: %s\n", what);
    std::abort();
  }
}

void fuzz_encode(const std::string& s, bool allow_special) {
  auto t = tokenizer();
  auto ids = t->encode(s, allow_special);
  for (TokenId id : ids) check(id >= 0 && id < t->vocab_size(), "encode id in range");
  std::string back = t->decode(ids);
  check(valid_utf8_prefix(back) == back.size(), "decode gives valid UTF-8");
  const std::string fixed = to_valid_utf8(s);
  if (quick_nfc(fixed)) check(back == fixed, "decode(encode(x)) == x on NFC text");
}

void fuzz_decode(const uint8_t* d, size_t n, bool skip) {
  auto t = tokenizer();
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    int32_t v;
    std::memcpy(&v, d + i, 4);
    // Mostly real ids (so byte tokens split characters), sometimes anything at all.
    ids.push_back((v & 0x40000000) ? v : int32_t(uint32_t(v) % 151680));
  }
  std::string whole = t->decode(ids, skip);
  StreamDecoder sd(t, skip);
  std::string streamed;
  for (TokenId id : ids) {
    std::string piece = sd.push(id);
    check(valid_utf8_prefix(piece) == piece.size(), "stream piece is valid UTF-8");
    streamed += piece;
  }
  streamed += sd.flush();
  check(streamed == whole, "stream == decode");
}

void fuzz_template(const std::string& s) {
  auto j = nlohmann::ordered_json::parse(s, nullptr, false);
  if (j.is_discarded()) return;
  nlohmann::ordered_json messages = j, tools;
  if (j.is_object()) {
    messages = j.value("messages", nlohmann::ordered_json());
    tools = j.value("tools", nlohmann::ordered_json());
  }
  ChatOptions opt;
  opt.add_generation_prompt = s.size() % 2;
  if (s.size() % 3 == 0) opt.enable_thinking = s.size() % 5 == 0;
  try {
    std::string text = render_chat(messages, tools, opt);
    (void)tokenizer()->encode(text);
  } catch (const tandem::Error&) {
    // malformed requests are rejected with a clear error: fine
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 5;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (mode) {
    case 0:
      fuzz_encode(rest, true);
      break;
    case 1:
      fuzz_encode(rest, false);
      break;
    case 2:
      fuzz_decode(data + 1, size - 1, false);
      break;
    case 3:
      fuzz_decode(data + 1, size - 1, true);
      break;
    default:
      fuzz_template(rest);
      break;
  }
  return 0;
}
