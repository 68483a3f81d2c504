#pragma once
// What the model-store commands (import, create, list, show, cp, rm) share: the
// --models-dir option, sizes and ages as people read them, and a progress bar on stderr.
#include <chrono>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "store/model_store.h"

namespace tandem::cli {

// --models-dir DIR (default: $TANDEM_MODELS, else the per-user folder; help says which).
void add_models_dir_option(CLI::App& sub, std::string& dir);
store::ModelStore open_store(const std::string& models_dir);

std::string human_bytes(uint64_t n);                     // "5.2 GB" (decimal, as Ollama)
std::string human_age(const std::string& rfc3339_time);  // "3 minutes ago"

// Hashing/copying progress on stderr: one redrawn line on a terminal, a line per finished
// file otherwise.
class ProgressBar {
 public:
  ProgressBar();
  ~ProgressBar();
  store::ProgressFn fn();
  void finish();  // ends the current line

 private:
  void on(const store::ProgressEvent& e);
  bool tty_;
  std::string file_, stage_;
  uint64_t total_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace tandem::cli
