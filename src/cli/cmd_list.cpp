// tandem list: the models of the store, as `ollama list` shows them.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/store_cli.h"

namespace {
struct Opts {
  std::string models_dir;
};
}  // namespace

TANDEM_COMMAND(list, 23, "List the models of the store", [](CLI::App& sub) -> tandem::cli::RunFn {
  auto o = std::make_shared<Opts>();
  tandem::cli::add_models_dir_option(sub, o->models_dir);
  return [o] {
    using namespace tandem;
    auto store = cli::open_store(o->models_dir);
    auto models = store.list();
    size_t w = 4;
    for (auto& m : models) w = std::max(w, m.name.str().size());
    std::string out = fmt::format("{:<{}}  {:<12}  {:<8}  {:<10}  {}\n", "NAME", w, "ID", "SIZE",
                                  "WEIGHTS", "MODIFIED");
    for (auto& m : models)
      out += fmt::format("{:<{}}  {:<12}  {:<8}  {:<10}  {}\n", m.name.str(), w,
                         m.digest.substr(7, 12), cli::human_bytes(m.size()),
                         m.mode == store::WeightsMode::kBlobs ? "imported" : "reference",
                         cli::human_age(m.created_at));
    std::fputs(out.c_str(), stdout);
    return 0;
  };
});
