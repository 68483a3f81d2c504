#include "structured/vocabulary.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "structured/charset.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured {

int plain_length(const std::string& s) {
  int n = 0;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    if (!decode_utf8(s, i, cp)) return 0;
    if (cp < 0x20 || cp == '"' || cp == '\\') return 0;
    ++n;
  }
  return n;
}

TokenTrie TokenTrie::build(std::vector<std::pair<std::string, TokenId>> tokens) {
  std::sort(tokens.begin(), tokens.end());
  TokenTrie t;
  t.nodes.push_back({kNoToken << 8, 0});
  // path[d] = index of the node at depth d + 1 on the current path.
  std::vector<uint32_t> path;
  std::string prev;
  auto close = [&](size_t depth) {
    while (path.size() > depth) {
      uint32_t i = path.back();
      path.pop_back();
      t.nodes[i].size = uint32_t(t.nodes.size() - i);
    }
  };
  for (auto& [bytes, id] : tokens) {
    size_t common = 0;
    while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) ++common;
    close(common);
    for (size_t d = common; d < bytes.size(); ++d) {
      path.push_back(uint32_t(t.nodes.size()));
      t.nodes.push_back({uint32_t(uint8_t(bytes[d])) | kNoToken << 8, 1});
    }
    TrieNode& leaf = t.nodes[path.back()];
    leaf.byte_token = uint32_t(leaf.byte()) | uint32_t(id) << 8;
    t.max_depth = std::max(t.max_depth, int(bytes.size()));
    prev = bytes;
  }
  close(0);
  t.nodes[0].size = uint32_t(t.nodes.size());
  return t;
}

Vocabulary::Vocabulary(std::vector<std::string> bytes, int mask_size, std::vector<TokenId> eos)
    : bytes_(std::move(bytes)), mask_size_(mask_size), eos_(std::move(eos)) {
  TANDEM_CHECK(mask_size_ >= int(bytes_.size()));
  for (TokenId e : eos_) TANDEM_CHECK(e >= 0 && e < mask_size_);
  std::vector<std::vector<std::pair<std::string, TokenId>>> groups(kMaxPlainRun + 2);
  std::vector<std::pair<std::string, TokenId>> rest;
  std::map<std::string, TokenId> first;
  const size_t words = size_t(mask_words());
  plain_upto_.assign(size_t(kMaxPlainRun + 2) * words, 0);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const std::string& b = bytes_[id];
    if (b.empty() || is_eos(TokenId(id))) continue;
    auto [it, fresh] = first.emplace(b, TokenId(id));
    if (!fresh) {
      dups_.push_back({it->second, TokenId(id)});
      continue;
    }
    int n = plain_length(b);
    if (n == 0) {
      rest.push_back({b, TokenId(id)});
      continue;
    }
    int k = std::min(n, kMaxPlainRun + 1);
    groups[size_t(k)].push_back({b, TokenId(id)});
    for (int j = k; j <= kMaxPlainRun + 1; ++j)
      plain_upto_[size_t(j) * words + id / 32] |= 1u << (id % 32);
  }
  plain_.resize(kMaxPlainRun + 2);
  for (int k = 1; k <= kMaxPlainRun + 1; ++k) plain_[size_t(k)] = TokenTrie::build(groups[k]);
  rest_ = TokenTrie::build(std::move(rest));
}

bool Vocabulary::is_eos(TokenId id) const {
  return std::find(eos_.begin(), eos_.end(), id) != eos_.end();
}

std::shared_ptr<const Vocabulary> Vocabulary::from_tokenizer(const tok::Tokenizer& t, int mask_size,
                                                             std::vector<TokenId> eos) {
  int n = std::min(t.vocab_size(), mask_size);
  std::vector<std::string> bytes(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id)
    if (!t.is_special(id)) bytes[size_t(id)] = t.token_bytes(id);
  return std::make_shared<Vocabulary>(std::move(bytes), mask_size, std::move(eos));
}

}  // namespace tandem::structured
