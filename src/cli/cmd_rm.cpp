// tandem rm: remove models from the store, and the files no other model uses.
#include <cstdio>

#include "cli/command.h"
#include "cli/store_cli.h"
#include "core/error.h"

namespace {
struct Opts {
  std::vector<std::string> names;
  std::string models_dir;
};
}  // namespace

TANDEM_COMMAND(rm, 26, "Remove models from the store", [](CLI::App& sub) -> tandem::cli::RunFn {
  auto o = std::make_shared<Opts>();
  sub.add_option("models", o->names, "Models to remove")->required();
  tandem::cli::add_models_dir_option(sub, o->models_dir);
  return [o] {
    auto store = tandem::cli::open_store(o->models_dir);
    int rc = 0;
    for (auto& n : o->names) {
      try {
        auto m = store.remove(n);
        std::printf("deleted '%s'\n", m.name.shortest().c_str());
      } catch (const tandem::Error& e) {
        std::fprintf(stderr, "tandem rm: error: %s\n", e.what());
        rc = 1;
      }
    }
    return rc;
  };
});
