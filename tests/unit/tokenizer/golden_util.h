#pragma once
// Reading the committed tokenizer goldens (gzip-compressed JSON lines made by
// scripts/golden/make_tokenizer_goldens.py with Hugging Face tokenizers/transformers).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "tokenizer/tokenizer.h"

namespace tandem::tok::testing {

inline std::filesystem::path golden_dir() {
  return std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "golden" / "tokenizer";
}

// All rows of NAME.jsonl.gz, decompressed by gzip (present on every Debian system).
inline std::vector<nlohmann::ordered_json> read_golden(const std::string& name) {
  const auto path = golden_dir() / (name + ".jsonl.gz");
  std::vector<nlohmann::ordered_json> rows;
  if (!std::filesystem::exists(path)) return rows;
  std::string cmd = "gzip -dc '" + path.string() + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return rows;
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p.get())) > 0) data.append(buf, n);
  size_t i = 0;
  while (i < data.size()) {
    size_t e = data.find('\n', i);
    if (e == std::string::npos) e = data.size();
    if (e > i) rows.push_back(nlohmann::ordered_json::parse(data.substr(i, e - i)));
    i = e + 1;
  }
  return rows;
}

// The pinned Qwen3 tokenizer, loaded once per test binary.
inline std::shared_ptr<const Tokenizer> qwen3() {
  static std::shared_ptr<const Tokenizer> t = [] {
    auto dir = find_tokenizer_source();
    if (!dir) throw std::runtime_error("Qwen3 tokenizer files not found (run scripts/setup.sh)");
    return Tokenizer::load(*dir);
  }();
  return t;
}

inline std::vector<TokenId> ids_of(const nlohmann::ordered_json& j) {
  return j.get<std::vector<TokenId>>();
}

}  // namespace tandem::tok::testing
