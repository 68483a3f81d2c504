#pragma once
// Model names as Ollama writes them: `name[:tag]`, the tag "latest" when left out. A name is
// one or more `/`-separated parts ("qwen3-14b", "library/qwen3", "hf.co/Qwen/Qwen3-8B") of
// letters, digits, `.`, `_` and `-`, each starting with a letter or digit; a tag is letters,
// digits, `.`, `_` and `-` (at most 128), starting with a letter, digit or `_`. Names are
// matched without regard to case, as Ollama matches them, and shown as first written.
#include <optional>
#include <string>
#include <string_view>

namespace tandem::store {

struct ModelName {
  std::string name;
  std::string tag = "latest";

  std::string str() const { return name + ":" + tag; }  // "qwen3:latest"
  // "qwen3" for the latest tag, else "qwen3:fast": what a user would type.
  std::string shortest() const { return tag == "latest" ? name : str(); }
  // Lowercase "name:tag": equal keys are the same model.
  std::string key() const;
  bool same(const ModelName& o) const { return key() == o.key(); }
};

// Throws Error(kInvalidArgument) saying what is wrong with `s`.
ModelName parse_model_name(std::string_view s);
std::optional<ModelName> try_parse_model_name(std::string_view s);

}  // namespace tandem::store
