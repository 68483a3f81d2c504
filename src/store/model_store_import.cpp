#include "store/model_store_import.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace tandem::store {
namespace {

bool wanted(const std::string& n) {
  auto ends = [&](const char* s) {
    std::string_view e(s);
    return n.size() >= e.size() && n.compare(n.size() - e.size(), e.size(), e) == 0;
  };
  if (n.empty() || n[0] == '.') return false;
  if (ends(".safetensors") || ends(".json")) return true;
  return n == "chat_template.jinja" || n == "merges.txt" || n == "vocab.txt" ||
         n.rfind("LICENSE", 0) == 0 || n == "README.md";
}

std::string human_params(int64_t n) {
  const double x = double(n);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.1f}M", x / 1e6);
  return fmt::format("{:.1f}K", x / 1e3);
}

std::string quant_level(const model::ModelConfig& c) {
  if (c.fp8) return "FP8";
  if (c.dtype == "float16") return "F16";
  if (c.dtype == "float32") return "F32";
  return "BF16";
}

}  // namespace

std::vector<fs::path> model_files(const fs::path& folder) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(folder, ec)) {
    if (!e.is_regular_file(ec)) continue;  // follows links (a Hugging Face cache snapshot)
    if (wanted(e.path().filename().string())) out.push_back(e.path());
  }
  if (ec) fail(ErrorKind::kIo, "cannot read {}: {}", folder.string(), ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

void check_model_folder(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    fail(ErrorKind::kNotFound, "{} is not a folder", folder.string());
  auto why = [&](const std::string& what) -> void {
    fail(ErrorKind::kInvalidArgument, "{} is not a model tandem can serve: {}", folder.string(),
         what);
  };
  if (!fs::exists(folder / "config.json", ec)) why("it has no config.json");
  try {
    (void)model::load_config(folder);
  } catch (const Error& e) {
    why(e.what());
  }
  if (!fs::exists(folder / "tokenizer.json", ec)) why("it has no tokenizer.json");
  try {
    (void)tok::Tokenizer::load(folder);
  } catch (const Error& e) {
    why(e.what());
  }
  try {
    model::Checkpoint ck(folder);
    if (!ck.has("model.embed_tokens.weight"))
      why("its safetensors hold no model.embed_tokens.weight");
  } catch (const Error& e) {
    why(e.what());
  }
}

json model_details(const fs::path& folder) {
  auto c = model::load_config(folder);
  json d;
  d["format"] = "safetensors";
  d["family"] = "qwen3";
  d["families"] = json::array({"qwen3"});
  d["parameter_size"] = human_params(c.num_params());
  d["quantization_level"] = quant_level(c);
  d["parameter_count"] = c.num_params();
  d["context_length"] = c.max_position_embeddings;
  return d;
}

Manifest import_model(const ModelStore& store, const fs::path& folder_in, const ModelName& name,
                      const ImportOptions& opt) {
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(fs::absolute(folder_in), ec);
  if (ec || !fs::is_directory(folder))
    fail(ErrorKind::kNotFound, "{} is not a folder", folder_in.string());
  // A folder inside the store (a view) would be a reference to the store itself.
  const fs::path store_dir = fs::weakly_canonical(fs::absolute(store.dir()), ec);
  if (folder.string().rfind(store_dir.string() + "/", 0) == 0)
    fail(ErrorKind::kInvalidArgument,
         "{} is inside the model store; copy a model with `tandem cp` instead", folder.string());
  check_model_folder(folder);
  Manifest m;
  m.name = name;
  m.mode = opt.link ? WeightsMode::kReference : WeightsMode::kBlobs;
  if (opt.link) m.folder = folder.string();
  for (auto& p : model_files(folder)) {
    StoredFile f;
    f.name = p.filename().string();
    f.size = fs::file_size(p);
    f.digest = opt.link ? store.blobs().hash_in_place(p, opt.progress, f.name)
                        : store.blobs().put_file(p, opt.progress, f.name);
    m.files.push_back(std::move(f));
  }
  m.details = model_details(folder);
  return store.put(std::move(m));
}

Manifest manifest_from_blobs(const ModelStore& store,
                             const std::map<std::string, std::string>& files,
                             const ModelName& name) {
  if (files.empty()) fail(ErrorKind::kInvalidArgument, "no files given");
  Manifest m;
  m.name = name;
  m.mode = WeightsMode::kBlobs;
  for (auto& [fname, digest] : files) {
    if (fs::path(fname).filename().string() != fname || fname.empty() || fname[0] == '.' ||
        !wanted(fname))
      fail(ErrorKind::kInvalidArgument,
           "file name '{}' is not one a model folder holds (a plain name such as config.json or "
           "model.safetensors, no folders)",
           fname);
    const std::string d = normalize_digest(digest);
    if (!store.blobs().has(d))
      fail(ErrorKind::kNotFound,
           "blob {} ({}) is not on the server; upload it first (POST /api/blobs/{})", d, fname, d);
    m.files.push_back({fname, d, store.blobs().size(d)});
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const StoredFile& a, const StoredFile& b) { return a.name < b.name; });
  const fs::path dir = store.model_dir(m);
  check_model_folder(dir);
  m.details = model_details(dir);
  return m;
}

}  // namespace tandem::store
