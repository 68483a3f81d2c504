// tandem import: add a checkpoint folder to the model store under a name (docs/MODELS.md).
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/store_cli.h"
#include "core/error.h"
#include "store/model_store_import.h"

namespace {
struct Opts {
  std::string folder, name, models_dir;
  bool link = false;
};

// The folder's own name as a model name ("Qwen3-14B" -> "qwen3-14b"), when it makes one.
std::string default_name(const std::filesystem::path& folder) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(folder), ec);
  std::string n = p.filename().string();
  for (auto& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
  return n;
}
}  // namespace

TANDEM_COMMAND(import, 22, "Add a model folder to the model store under a name",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("folder", o->folder,
                                "Checkpoint folder (config.json, tokenizer.json, *.safetensors)")
                     ->required();
                 sub.add_option("--name", o->name, "Model name[:tag] (default: the folder's name)");
                 sub.add_flag(
                     "--link", o->link,
                     "Keep the files where they are (hashed, not copied); the folder must stay");
                 tandem::cli::add_models_dir_option(sub, o->models_dir);
                 return [o] {
                   using namespace tandem;
                   auto store = cli::open_store(o->models_dir);
                   const std::string n = o->name.empty() ? default_name(o->folder) : o->name;
                   store::ModelName name = store::parse_model_name(n);
                   store::ImportOptions io;
                   io.link = o->link;
                   cli::ProgressBar bar;
                   io.progress = bar.fn();
                   auto m = store::import_model(store, o->folder, name, io);
                   bar.finish();
                   std::printf("imported %s as %s (%s, %s%s) into %s\n", o->folder.c_str(),
                               m.name.shortest().c_str(), cli::human_bytes(m.size()).c_str(),
                               m.details.value("parameter_size", "?").c_str(),
                               o->link ? ", by reference" : "", store.dir().c_str());
                   return 0;
                 };
               });
