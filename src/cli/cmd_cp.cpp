// tandem cp: copy a model of the store to a new name (the weights are shared, not copied).
#include <cstdio>

#include "cli/command.h"
#include "cli/store_cli.h"

namespace {
struct Opts {
  std::string src, dst, models_dir;
};
}  // namespace

TANDEM_COMMAND(cp, 25, "Copy a model of the store to a new name",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("source", o->src, "Model to copy")->required();
                 sub.add_option("destination", o->dst, "New name[:tag]")->required();
                 tandem::cli::add_models_dir_option(sub, o->models_dir);
                 return [o] {
                   auto store = tandem::cli::open_store(o->models_dir);
                   auto m = store.copy(o->src, o->dst);
                   std::printf("copied '%s' to '%s'\n", o->src.c_str(), m.name.shortest().c_str());
                   return 0;
                 };
               });
