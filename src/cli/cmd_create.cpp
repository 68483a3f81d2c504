// tandem create: make a model from a Modelfile (FROM, PARAMETER, SYSTEM, MESSAGE, LICENSE),
// as `ollama create NAME -f Modelfile` does (docs/MODELS.md).
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/store_cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "store/model_store_create.h"

namespace {
struct Opts {
  std::string name, file = "Modelfile", models_dir;
  bool link = false;
};

int run_create(const Opts& o) {
  using namespace tandem;
  namespace fs = std::filesystem;
  auto store = cli::open_store(o.models_dir);
  store::ModelName name = store::parse_model_name(o.name);
  std::error_code ec;
  if (!fs::exists(o.file, ec))
    fail(ErrorKind::kNotFound, "{}: no such file (give the Modelfile with -f)", o.file);
  auto mf = store::parse_modelfile(read_file(o.file), o.file);
  for (auto& n : mf.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  fs::path base = fs::absolute(o.file).parent_path();
  auto spec = store::spec_from_modelfile(mf, name, base);
  spec.link = o.link;
  cli::ProgressBar bar;
  try {
    store::create_model(
        store, spec,
        [&](const std::string& s) {
          bar.finish();
          std::fprintf(stderr, "%s\n", s.c_str());
        },
        bar.fn());
  } catch (const Error& e) {
    bar.finish();
    // Name the FROM line for errors about what FROM names.
    if (e.kind() == ErrorKind::kNotFound || std::string(e.what()).rfind("FROM", 0) == 0)
      fail(e.kind(), "{}:{}: {}", o.file, mf.from_line, e.what());
    throw;
  }
  bar.finish();
  std::printf("success: created %s\n", name.shortest().c_str());
  return 0;
}
}  // namespace

TANDEM_COMMAND(create, 21, "Create a model from a Modelfile",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("model", o->name, "Name[:tag] of the new model")->required();
                 sub.add_option("-f,--file", o->file, "The Modelfile")->capture_default_str();
                 sub.add_flag("--link", o->link,
                              "A FROM folder is kept by reference instead of copied");
                 tandem::cli::add_models_dir_option(sub, o->models_dir);
                 return [o] { return run_create(*o); };
               });
