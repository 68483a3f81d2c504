#pragma once
// Making a model: `tandem create NAME -f Modelfile` and /api/create. The new model takes its
// weights from FROM (another store model: the same files, no copy; or a folder, imported)
// or from uploaded blobs, and layers the given parameters, system prompt, messages and
// license over what FROM had: parameters by name (a new `stop` list replaces the old one),
// the others replaced when given.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/model_store.h"
#include "store/modelfile.h"

namespace tandem::store {

struct CreateSpec {
  ModelName name;
  std::string from;                          // store name or folder; "" when `files` is given
  bool from_may_be_folder = true;            // false for requests from the network
  std::map<std::string, std::string> files;  // file name -> digest of an uploaded blob
  json parameters = json::object();          // typed, as store/modelfile_params.h gives them
  std::optional<std::string> system;
  std::optional<std::vector<StoredMessage>> messages;
  std::optional<std::vector<std::string>> license;
  bool link = false;  // a FROM folder is kept by reference instead of copied
};

using StatusFn = std::function<void(const std::string& status)>;

// A Modelfile as a CreateSpec; a relative FROM path is taken from `base_dir` (the
// Modelfile's folder) and `~/` from $HOME, as Ollama resolves them.
CreateSpec spec_from_modelfile(const Modelfile& mf, const ModelName& name,
                               const std::filesystem::path& base_dir);

// Throws Error: kNotFound when FROM names nothing, kInvalidArgument for unusable input.
Manifest create_model(const ModelStore& store, const CreateSpec& spec, const StatusFn& status = {},
                      const ProgressFn& progress = {});

}  // namespace tandem::store
