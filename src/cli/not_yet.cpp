// Subcommands whose issue has not landed yet. They say so plainly and exit non-zero rather
// than pretend. Remove an entry here when its real cmd_<name>.cpp arrives.
#include <cstdio>

#include "cli/command.h"

namespace {
tandem::cli::ConfigureFn not_yet(const char* name, const char* what) {
  return [name, what](CLI::App& sub) -> tandem::cli::RunFn {
    sub.allow_extras();
    return [name, what] {
      std::fprintf(stderr, "tandem %s: not available yet: %s\n", name, what);
      return 3;
    };
  };
}
}  // namespace

TANDEM_COMMAND(serve, 10, "Start the OpenAI/Ollama-compatible HTTP server",
               not_yet("serve", "the HTTP server (issue: HTTP APIs) has not landed"));
TANDEM_COMMAND(run, 20, "Interactive chat in the terminal",
               not_yet("run", "the terminal chat needs the HTTP server and engine"));
