#pragma once
// Adding a checkpoint folder to the model store (`tandem import`, a Modelfile's FROM
// <folder>, /api/create with files). The folder is checked first (a Qwen3 config.json
// tandem runs, a tokenizer, readable safetensors headers: a folder that cannot be served is
// refused before anything is copied), then each of its model files is hashed: copied into
// blobs/ as it is hashed, or, by reference, hashed where it lies.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "store/model_store.h"

namespace tandem::store {

struct ImportOptions {
  bool link = false;  // by reference: the folder stays where it is and is read from there
  ProgressFn progress;
};

// The files of `folder` an import takes: *.safetensors, *.json, chat_template.jinja,
// merges.txt, vocab.txt, LICENSE*, README.md; sorted. Subfolders and other weights formats
// (.bin, .pth, .gguf) are left out.
std::vector<std::filesystem::path> model_files(const std::filesystem::path& folder);

// Throws Error naming what makes `folder` unservable.
void check_model_folder(const std::filesystem::path& folder);

// Ollama's details and model_info facts of a model folder: format, family, parameter_size,
// quantization_level, parameter_count, context_length.
json model_details(const std::filesystem::path& folder);

// Imports `folder` under `name` (replacing a model of that name). Returns the manifest.
Manifest import_model(const ModelStore& store, const std::filesystem::path& folder,
                      const ModelName& name, const ImportOptions& opt = {});

// A manifest for files already in blobs/ (/api/create's `files`: name -> digest). Every
// blob must be present; the files must make a servable model.
Manifest manifest_from_blobs(const ModelStore& store,
                             const std::map<std::string, std::string>& files,
                             const ModelName& name);

}  // namespace tandem::store
