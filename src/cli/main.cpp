// tandem: one binary, many subcommands (see command.h for how a command registers).
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/command.h"
#include "core/crash.h"
#include "core/error.h"
#include "core/log.h"
#include "core/version.h"

namespace tandem::cli {
std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> r;
  return r;
}
}  // namespace tandem::cli

int main(int argc, char** argv) {
  using namespace tandem;
  // A crash in any command (the server above all) prints its signal and backtrace.
  install_crash_handler();
  CLI::App app{"tandem: a fast Qwen3 server in one binary"};
  app.set_version_flag("--version", std::string("tandem ") + TANDEM_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.require_subcommand(1);

  auto& reg = cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.order < b.order; });
  std::map<CLI::App*, cli::RunFn> runs;
  for (auto& c : reg) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runs[sub] = c.configure(*sub);
  }

  // CLI11 reports a misspelt command as "a subcommand is required"; say what is wrong.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (auto& c : reg) {
      known |= c.name == argv[1];
      names += (names.empty() ? "" : ", ") + c.name;
    }
    if (!known) {
      std::fprintf(stderr, "tandem: unknown command '%s' (commands: %s; see tandem --help)\n",
                   argv[1], names.c_str());
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints the message (and help on --help); non-zero on errors
  }

  init_logging(log_level);
  for (auto& [sub, run] : runs) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const Error& e) {
      std::fprintf(stderr, "tandem %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tandem %s: unexpected error: %s\n", sub->get_name().c_str(), e.what());
      return 2;
    }
  }
  return 1;
}
