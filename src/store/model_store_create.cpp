#include "store/model_store_create.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "store/model_store_import.h"

namespace fs = std::filesystem;

namespace tandem::store {
namespace {

fs::path expand(const std::string& p, const fs::path& base) {
  if (p == "~" || p.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return fs::path(home ? home : "") / p.substr(p.size() > 1 ? 2 : 1);
  }
  fs::path x(p);
  return x.is_absolute() ? x : base / x;
}

// A value that can only be a path: a leading '/', '.', '~'.
bool looks_like_path(const std::string& s) {
  return !s.empty() && (s[0] == '/' || s[0] == '.' || s[0] == '~');
}

}  // namespace

CreateSpec spec_from_modelfile(const Modelfile& mf, const ModelName& name, const fs::path& base) {
  CreateSpec s;
  s.name = name;
  std::error_code ec;
  const fs::path p = expand(mf.from, base);
  if (fs::exists(p, ec) || looks_like_path(mf.from))
    s.from = p.string();
  else
    s.from = mf.from;
  s.parameters = mf.parameters;
  s.system = mf.system;
  if (!mf.messages.empty()) s.messages = mf.messages;
  if (!mf.license.empty()) s.license = mf.license;
  return s;
}

Manifest create_model(const ModelStore& store, const CreateSpec& spec, const StatusFn& status,
                      const ProgressFn& progress) {
  auto say = [&](const std::string& s) {
    if (status) status(s);
  };
  Manifest m;
  std::error_code ec;
  if (!spec.from.empty()) {
    const fs::path p(spec.from);
    const bool is_folder = spec.from_may_be_folder && fs::is_directory(p, ec);
    if (spec.from_may_be_folder && !is_folder &&
        (fs::exists(p, ec) || looks_like_path(spec.from))) {
      if (fs::exists(p, ec))
        fail(ErrorKind::kInvalidArgument,
             "FROM {}: a file; tandem models come from a folder of safetensors weights with "
             "config.json and tokenizer.json (GGUF files are not supported)",
             spec.from);
      fail(ErrorKind::kNotFound, "FROM {}: no such folder", spec.from);
    }
    auto in_store = is_folder ? store.find_by_view(p) : std::nullopt;
    if (in_store) {
      // A view of the store's own blobs (FROM as `tandem show --modelfile` writes it): the
      // same weights, and only what this spec gives on top of them.
      say(fmt::format("using the weights of {}", in_store->name.shortest()));
      m = *in_store;
      m.parameters = json::object();
      m.system.reset();
      m.messages.clear();
      m.license.clear();
      m.parent.clear();
    } else if (is_folder) {
      say(fmt::format("importing {}", p.string()));
      ImportOptions io;
      io.link = spec.link;
      io.progress = progress;
      // Imported under the new name first, then the Modelfile's layer goes over it.
      m = import_model(store, p, spec.name, io);
    } else {
      auto parent = store.find(spec.from);
      if (!parent) {
        if (!try_parse_model_name(spec.from))
          fail(ErrorKind::kInvalidArgument, "FROM '{}' is neither a model name nor a folder",
               spec.from);
        fail(ErrorKind::kNotFound,
             "FROM {}: no model of that name in {}{} (`tandem list` shows the store)", spec.from,
             store.dir().string(), spec.from_may_be_folder ? " and no such folder" : "");
      }
      say(fmt::format("using model {}", parent->name.shortest()));
      m = *parent;
      m.parent = parent->name.str();
    }
  } else if (!spec.files.empty()) {
    say("checking the uploaded files");
    m = manifest_from_blobs(store, spec.files, spec.name);
  } else {
    fail(ErrorKind::kInvalidArgument, "neither 'from' nor 'files' was given");
  }
  m.name = spec.name;
  m.created_at.clear();
  m.digest.clear();
  for (auto& [k, v] : spec.parameters.items()) m.parameters[k] = v;
  if (spec.system) m.system = *spec.system;
  if (spec.messages) m.messages = *spec.messages;
  if (spec.license) m.license = *spec.license;
  say("writing manifest");
  return store.put(std::move(m));
}

}  // namespace tandem::store
