#pragma once
// The Qwen3 tokenizer: Hugging Face `tokenizers` byte-level BPE, byte-exact.
//
// encode(text) follows HF's pipeline:
//   1. split the raw text on added tokens (leftmost-longest match; with allow_special=false
//      only the special=true ones are skipped, as HF's `encode_special_tokens` does);
//   2. each remaining segment: NFC, then the Split regex (pieces), then per piece BPE over
//      its bytes.
// Invalid UTF-8 input is first replaced with U+FFFD (maximal subparts), as Python's
// bytes.decode("utf-8", "replace") would before calling HF; see docs/TOKENIZER.md.
// decode(ids) maps ids to bytes and replaces invalid UTF-8 the same way; ids that name no
// token (negative, or in the padded rows past vocab_size()) are dropped, as HF drops them.
// All methods are const and safe to call from many threads at once.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"

namespace tandem::tok {

class RegexSplitter;

struct AddedToken {
  std::string content;
  TokenId id;
  bool special;
};

class Tokenizer {
 public:
  // Loads DIR/tokenizer.json (+ tokenizer_config.json when present). Throws tandem::Error
  // naming any unsupported part.
  static std::shared_ptr<const Tokenizer> load(const std::filesystem::path& dir);
  // The same from the text of tokenizer.json and (possibly empty) tokenizer_config.json.
  static std::shared_ptr<const Tokenizer> from_json(std::string_view tokenizer_json,
                                                    std::string_view config_json = {});

  std::vector<TokenId> encode(std::string_view text, bool allow_special = true) const;
  // Appends to `out` (lets callers build one id list from several parts without copies).
  void encode_into(std::string_view text, bool allow_special, std::vector<TokenId>& out) const;

  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const;
  std::string token_bytes(TokenId id) const;  // raw bytes of one token; "" for unknown ids
  std::optional<TokenId> find_token(std::string_view added_token_text) const;  // "<think>"
  bool is_special(TokenId id) const;  // special=true added tokens
  int vocab_size() const;             // ids < this are valid

  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // chat_template from tokenizer_config.json ("" when absent).
  const std::string& chat_template() const { return chat_template_; }
  std::optional<TokenId> eos_token_id() const { return eos_; }

  ~Tokenizer();

 private:
  Tokenizer();
  // Where the next added token starts in `text` at or after `from`: (start, index into
  // added_), or start == npos when none.
  std::pair<size_t, size_t> next_added(std::string_view text, size_t from,
                                       bool allow_special) const;
  void encode_segment(std::string_view valid_utf8, std::vector<TokenId>& out) const;

  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<RegexSplitter> splitter_;
  bool nfc_ = false;
  std::vector<AddedToken> added_;  // longest first within the same first byte
  bool added_first_byte_[256] = {};
  std::vector<std::string> bytes_of_;  // id -> raw bytes ("" for holes)
  std::vector<uint8_t> special_of_;    // id -> special added token
  std::string chat_template_;
  std::optional<TokenId> eos_;
};

// Loads the tokenizer of a model folder, or with an empty `dir` the pinned Qwen3 files
// (find_tokenizer_source()). Throws tandem::Error(kNotFound) with a hint when absent.
std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace tandem::tok
