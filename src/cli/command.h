#pragma once
// Subcommand registry. Each command lives in its own cmd_<name>.cpp and registers itself:
//
//   static int run_foo(const FooOpts&);
//   TANDEM_COMMAND(foo, 50, "what foo does", [](CLI::App& sub) -> tandem::cli::RunFn {...});
//
// `configure` adds the command's options to `sub` and returns the function main() calls
// once parsing succeeded; its return value is the process exit code.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tandem::cli {

using RunFn = std::function<int()>;

// An option that shows its default in --help and must lie in [lo, hi].
template <class T, class B>
CLI::Option* ranged_option(CLI::App& app, const std::string& name, T& var, const std::string& help,
                           B lo, B hi) {
  return app.add_option(name, var, help)->capture_default_str()->check(CLI::Range(lo, hi));
}
using ConfigureFn = std::function<RunFn(CLI::App& sub)>;

struct CommandInfo {
  std::string name;
  int order;  // position in --help
  std::string help;
  ConfigureFn configure;
};

std::vector<CommandInfo>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, int order, std::string help, ConfigureFn fn) {
    command_registry().push_back({std::move(name), order, std::move(help), std::move(fn)});
  }
};

}  // namespace tandem::cli

#define TANDEM_COMMAND(name, order, help, fn) \
  static ::tandem::cli::CommandRegistrar tandem_cmd_##name(#name, order, help, fn)
