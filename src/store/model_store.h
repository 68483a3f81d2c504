#pragma once
// The model store (docs/MODELS.md): Ollama-style names -> manifests -> weights.
//
//   <dir>/manifests/<name>@<tag>.json   one per model ('/' in a name written as '+')
//   <dir>/blobs/sha256-<hex>            imported files, content-addressed (store/blob_store.h)
//   <dir>/views/<weights id>/           links named as the model's files, into blobs/
//   <dir>/verified/                     stamps of files found to hold their digest
//
// A manifest names its files (config.json, tokenizer, safetensors shards, generation
// config) by digest, either imported into blobs/ or kept by reference in the folder they
// came from, and carries what a Modelfile adds: parameters, a system prompt, messages, a
// license. Presets made from the same weights list the same files, so they have the same
// weights_id() and a server loads the weights once for all of them.
//
// Every file is written beside its target and renamed into place (a crash leaves the old
// version or the new one); writers of manifests hold <dir>/.lock. Loading checks each file
// against its digest (store/blob_store.h: unchanged files are not read again).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/blob_store.h"
#include "store/model_store_name.h"
#include "store/modelfile.h"

namespace tandem::store {

using json = nlohmann::ordered_json;

struct StoredFile {
  std::string name;    // as the folder names it: "config.json", "model-00001-of-00004.safetensors"
  std::string digest;  // "sha256:<hex>"
  uint64_t size = 0;
  bool operator==(const StoredFile&) const = default;
};

enum class WeightsMode { kBlobs, kReference };

struct Manifest {
  ModelName name;
  std::string created_at;  // RFC 3339
  WeightsMode mode = WeightsMode::kBlobs;
  std::string folder;                // kReference: the folder the files are read from (absolute)
  std::vector<StoredFile> files;     // sorted by name
  std::string parent;                // "qwen3:latest" when made FROM another store model
  json parameters = json::object();  // store/modelfile_params.h
  std::optional<std::string> system;
  std::vector<StoredMessage> messages;
  std::vector<std::string> license;
  // From the weights: format, family, parameter_size, quantization_level, parameter_count,
  // context_length (Ollama's details and model_info).
  json details = json::object();

  std::string digest;  // sha256 of the manifest file as stored (set by ModelStore)

  // Identifies the weights: the same files (names and digests), the same id.
  std::string weights_id() const;
  uint64_t size() const;  // bytes of all files
  const StoredFile* file(std::string_view name) const;

  json to_json() const;
  // Throws Error(kInvalidArgument) naming `where` for a malformed manifest.
  static Manifest from_json(const json& j, const std::string& where);
};

// The model as a Modelfile (`tandem show --modelfile`, /api/show): FROM `from_dir` (the
// folder it loads from), its parameters, system prompt, messages and license; creating a
// model from this text gives the same model.
std::string modelfile_text(const Manifest& m, const std::filesystem::path& from_dir);

class ModelStore {
 public:
  // $TANDEM_MODELS, else $XDG_DATA_HOME/tandem/models, else ~/.local/share/tandem/models.
  static std::filesystem::path default_dir();
  // `flag` when given (--models-dir), else default_dir().
  static std::filesystem::path resolve_dir(const std::string& flag);

  explicit ModelStore(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const BlobStore& blobs() const { return blobs_; }

  std::vector<Manifest> list() const;  // sorted by name; unreadable manifests are skipped
  std::optional<Manifest> find(const ModelName& name) const;
  std::optional<Manifest> find(std::string_view name) const;  // nullopt for invalid names too
  // Throws Error(kNotFound) "model 'x' not found" (with a hint).
  Manifest get(std::string_view name) const;

  // Writes `m` (replacing a model of the same name); returns it with its digest set.
  Manifest put(Manifest m) const;
  // Throws kNotFound for a missing source; replaces an existing destination.
  Manifest copy(std::string_view src, std::string_view dst) const;
  // Removes the model, and the blobs and views no other model uses. Returns what it removed.
  Manifest remove(std::string_view name) const;

  // The folder a loader reads: the reference folder, or the view of the blobs. Every file is
  // checked against its digest first (see blob_store.h: `full` reads every file again);
  // throws Error(kInvalidArgument) naming a corrupted file, kNotFound for a missing one.
  std::filesystem::path model_dir(const Manifest& m, bool full = false,
                                  const ProgressFn& progress = {}) const;
  void verify(const Manifest& m, bool full, const ProgressFn& progress = {}) const;
  // The model whose view `folder` is (a FROM line `tandem show --modelfile` wrote), if any.
  std::optional<Manifest> find_by_view(const std::filesystem::path& folder) const;

 private:
  std::filesystem::path manifest_path(const ModelName& n) const;
  std::filesystem::path view_dir(const Manifest& m) const;
  std::filesystem::path ensure_view(const Manifest& m) const;
  void collect_garbage(const Manifest& removed) const;

  std::filesystem::path dir_;
  BlobStore blobs_;
};

}  // namespace tandem::store
