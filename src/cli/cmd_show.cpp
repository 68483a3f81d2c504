// tandem show: what a model of the store is (as `ollama show`), or one part of it.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/store_cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "store/modelfile_params.h"

namespace {
struct Opts {
  std::string name, models_dir;
  bool modelfile = false, parameters = false, system = false, license = false, tmpl = false;
  bool verify = false;
};

std::string indent(const std::string& text, const char* pad) {
  std::string out = pad;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

int run_show(const Opts& o) {
  using namespace tandem;
  auto store = cli::open_store(o.models_dir);
  auto m = store.get(o.name);
  if (o.verify) {
    cli::ProgressBar bar;
    store.verify(m, /*full=*/true, bar.fn());
    bar.finish();
    std::printf("%s: all %zu files match their digests\n", m.name.shortest().c_str(),
                m.files.size());
    return 0;
  }
  const auto dir = store.model_dir(m);
  if (o.modelfile) {
    std::fputs(store::modelfile_text(m, dir).c_str(), stdout);
    return 0;
  }
  if (o.parameters) {
    std::string p = store::format_params(m.parameters);
    if (!p.empty()) std::printf("%s\n", p.c_str());
    return 0;
  }
  if (o.system) {
    if (m.system) std::printf("%s\n", m.system->c_str());
    return 0;
  }
  if (o.license) {
    for (auto& l : m.license) std::printf("%s\n", l.c_str());
    return 0;
  }
  if (o.tmpl) {
    auto j = nlohmann::json::parse(read_file(dir / "tokenizer_config.json"), nullptr, false);
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      std::printf("%s\n", j["chat_template"].get<std::string>().c_str());
    return 0;
  }
  const auto& d = m.details;
  std::string out = "  Model\n";
  auto row = [&](const char* k, const std::string& v) {
    out += fmt::format("    {:<20}{}\n", k, v);
  };
  row("architecture", d.value("family", "qwen3"));
  row("parameters", d.value("parameter_size", "?"));
  row("context length", std::to_string(d.value("context_length", 0)));
  row("quantization", d.value("quantization_level", "?"));
  row("size", cli::human_bytes(m.size()));
  row("weights", m.mode == store::WeightsMode::kBlobs
                     ? "imported (" + store.blobs().dir().string() + ")"
                     : "by reference (" + m.folder + ")");
  if (!m.parent.empty()) row("from", m.parent);
  out += "\n  Capabilities\n    completion\n    tools\n    thinking\n";
  if (!m.parameters.empty())
    out += "\n  Parameters\n" + indent(store::format_params(m.parameters), "    ") + "\n";
  if (m.system) out += "\n  System\n" + indent(*m.system, "    ") + "\n";
  if (!m.messages.empty()) {
    out += "\n  Messages\n";
    for (auto& msg : m.messages) row(msg.role.c_str(), msg.content);
  }
  if (!m.license.empty()) {
    out += "\n  License\n";
    for (auto& l : m.license) out += indent(l, "    ") + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}
}  // namespace

TANDEM_COMMAND(show, 24, "Show a model of the store (details, parameters, Modelfile)",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("model", o->name, "Model name")->required();
                 sub.add_flag("--modelfile", o->modelfile, "Print the model as a Modelfile");
                 sub.add_flag("--parameters", o->parameters, "Print its parameters");
                 sub.add_flag("--system", o->system, "Print its system prompt");
                 sub.add_flag("--license", o->license, "Print its license");
                 sub.add_flag("--template", o->tmpl, "Print its chat template");
                 sub.add_flag("--verify", o->verify,
                              "Read every file again and check it against its digest");
                 tandem::cli::add_models_dir_option(sub, o->models_dir);
                 return [o] { return run_show(*o); };
               });
